module gang

go 1.19
