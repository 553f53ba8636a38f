package gang

import "gang.dev/gang/internal/capi"

// Env is what the launcher's environment says about this process; -1 or ""
// where it says nothing.
type Env struct {
	Rank, Size           int
	LocalRank, LocalSize int
	NodeRank, NumNodes   int
	MasterAddr           string
	MasterPort           int
	// Source is "gang", "torchrun", "slurm", "openmpi", "pmi" or "none".
	Source string
}

// DetectEnv reads the launch environment the way New does when Options
// leave rank and size unset: GANG_*, then torchrun's, Open MPI's, PMI's and
// SLURM's variables; the first source with both a rank and a size wins.
func DetectEnv() (Env, error) {
	e := capi.NewGang_env_t()
	defer capi.DeleteGang_env_t(e)
	if err := call(func() int { return capi.Gang_env_detect(e) }); err != nil {
		return Env{}, err
	}
	return Env{
		Rank: e.GetRank(), Size: e.GetSize(),
		LocalRank: e.GetLocal_rank(), LocalSize: e.GetLocal_size(),
		NodeRank: e.GetNode_rank(), NumNodes: e.GetNum_nodes(),
		MasterAddr: e.GetMaster_addr(), MasterPort: e.GetMaster_port(),
		Source: e.GetSource(),
	}, nil
}
