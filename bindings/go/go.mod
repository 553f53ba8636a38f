module gang.dev/gang

go 1.19
