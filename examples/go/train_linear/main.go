// Command train_linear runs data-parallel SGD on a linear model with gang.
//
// Every rank owns a shard of synthetic data y = w*.x + b* + noise, drawn
// from a seed derived from its rank. Each step, every rank computes the
// gradient of the squared error on a mini-batch of its shard; one AllReduce
// with gang.Avg averages the gradients (and the loss, for printing) across
// ranks, and every rank applies the same update. The averaged gradient is
// bitwise identical on every rank, so the weights are too: the program
// checks that at the end with AllGather, and that the model found w* and b*.
// It exits nonzero if either check fails.
//
// Run 4 ranks on this machine with a launcher that sets GANG_RANK,
// GANG_SIZE and GANG_INIT_METHOD:
//
//	gangrun --nproc-per-node 4 -- train_linear
//
// Without one it runs as a single rank.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"

	"gang.dev/gang"
)

var (
	trueW = []float64{1.5, -2.0, 0.5, 3.0}
	trueB = 0.7
)

const (
	shard = 512
	batch = 32
)

func main() {
	steps := flag.Int("steps", 300, "SGD steps")
	lr := flag.Float64("lr", 0.1, "learning rate")
	flag.Parse()
	if err := train(*steps, *lr); err != nil {
		fmt.Fprintln(os.Stderr, "train_linear:", err)
		os.Exit(1)
	}
}

func train(steps int, lr float64) error {
	g, err := gang.New(gang.Options{})
	if err != nil {
		return err
	}
	defer g.Close()

	dim := len(trueW)
	x, y := makeShard(g.Rank(), dim)
	// params = [w..., b]; rank 0 draws the start, everyone takes it.
	params := make([]float64, dim+1)
	rng := rand.New(rand.NewSource(99))
	for i := range params {
		params[i] = rng.NormFloat64()
	}
	if err := gang.Broadcast(g, params, 0); err != nil {
		return err
	}

	// One buffer for the gradient and the loss, reduced in one call.
	gradLoss := make([]float64, dim+2)
	for step := 0; step < steps; step++ {
		for i := range gradLoss {
			gradLoss[i] = 0
		}
		lo := (step * batch) % shard
		for s := lo; s < lo+batch; s++ {
			e := params[dim] - y[s]
			for j := 0; j < dim; j++ {
				e += params[j] * x[s*dim+j]
			}
			for j := 0; j < dim; j++ {
				gradLoss[j] += 2 * e * x[s*dim+j] / batch
			}
			gradLoss[dim] += 2 * e / batch
			gradLoss[dim+1] += e * e / batch
		}
		if err := gang.AllReduce(g, gradLoss, gang.Avg); err != nil {
			return err
		}
		for j := range params {
			params[j] -= lr * gradLoss[j]
		}
		if g.Rank() == 0 && step%100 == 0 {
			fmt.Printf("step %4d  loss %.6f\n", step, gradLoss[dim+1])
		}
	}

	// Every rank must hold bitwise the same parameters...
	everyone := make([]float64, g.Size()*len(params))
	if err := gang.AllGather(g, everyone, params); err != nil {
		return err
	}
	identical := true
	for i, v := range everyone {
		if math.Float64bits(v) != math.Float64bits(params[i%len(params)]) {
			identical = false
		}
	}
	// ...and they must be the true ones.
	converged := math.Abs(params[dim]-trueB) < 0.02
	for j, w := range trueW {
		converged = converged && math.Abs(params[j]-w) < 0.02
	}
	if g.Rank() == 0 {
		fmt.Printf("ranks %d  params %.3f  identical %v  converged %v\n", g.Size(), params, identical, converged)
	}
	if !identical || !converged {
		return fmt.Errorf("identical=%v converged=%v", identical, converged)
	}
	return nil
}

// makeShard draws this rank's samples: x row-major, shard x dim.
func makeShard(rank, dim int) (x, y []float64) {
	rng := rand.New(rand.NewSource(int64(1234 + rank)))
	x = make([]float64, shard*dim)
	y = make([]float64, shard)
	for s := 0; s < shard; s++ {
		y[s] = trueB + 0.01*rng.NormFloat64()
		for j := 0; j < dim; j++ {
			x[s*dim+j] = 2*rng.Float64() - 1
			y[s] += trueW[j] * x[s*dim+j]
		}
	}
	return x, y
}
