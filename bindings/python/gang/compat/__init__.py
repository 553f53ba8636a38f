"""Other libraries' names for gang's API, in their shapes: fairseq2
(:mod:`gang.compat.fairseq2`) and fairseq (:mod:`gang.compat.fairseq`).
The package ``gang`` exports every one of them too."""
