"""A stand-in for the fairseq2 package, for the tests only: its gang and
device modules are gang's, so that code written for fairseq2 runs on gang
unchanged (test_fairseq2.py runs fairseq2's documented examples with it)."""
