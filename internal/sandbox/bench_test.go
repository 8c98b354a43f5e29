package sandbox_test

import (
	"context"
	"testing"

	"github.com/codecell/codecell/internal/kernel"
	"github.com/codecell/codecell/internal/sandbox"
)

// go test ./internal/sandbox -run '^$' -bench . -benchtime 20x

func BenchmarkSessionCell(b *testing.B) {
	for _, lang := range []kernel.Language{kernel.Python, kernel.JavaScript} {
		b.Run(string(lang), func(b *testing.B) {
			sb := newSandbox(b, testConfig(b), sandbox.Options{})
			k := startKernel(b, sb, lang)
			for b.Loop() {
				if res := execute(b, k, "x = 1", 0); res.Status != kernel.StatusOK {
					b.Fatal(res)
				}
			}
		})
	}
}

// BenchmarkOneShot is a whole fresh jail and interpreter per iteration.
func BenchmarkOneShot(b *testing.B) {
	for _, lang := range []kernel.Language{kernel.Python, kernel.JavaScript} {
		b.Run(string(lang), func(b *testing.B) {
			sb := newSandbox(b, testConfig(b), sandbox.Options{})
			for b.Loop() {
				res, err := sb.Run(context.Background(), lang, "1", 0)
				if err != nil || res.Status != kernel.StatusOK {
					b.Fatal(err, res)
				}
			}
		})
	}
}

// BenchmarkCreateSandbox is the cost of a sandbox's disk and cgroup.
func BenchmarkCreateSandbox(b *testing.B) {
	cfg := testConfig(b)
	for b.Loop() {
		newSandbox(b, cfg, sandbox.Options{})
	}
}
