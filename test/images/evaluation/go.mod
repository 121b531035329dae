module rlmesh.dev/test/evaluation

go 1.26.8
