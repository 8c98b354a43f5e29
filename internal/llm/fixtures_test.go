package llm

import (
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/codecell/codecell/internal/kernel"
)

// Debian's Python, which has pandas and matplotlib; the python3 first on
// PATH may be another one.
const python = "/usr/bin/python3"

// fixtureScript prints real pandas HTML and a real matplotlib PNG as JSON.
const fixtureScript = `
import base64, io, json
import numpy as np, pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rng = np.random.default_rng(1)
small = pd.DataFrame({"city": ["Oslo", "Lima", "Pune"], "temp": [3.5, 19.25, 31.0], "note": ["cold | wet", "mild", "hot"]},
                     index=pd.Index(["a", "b", "c"], name="id"))
long = pd.DataFrame({"x": np.arange(1000), "y": rng.normal(size=1000).round(3), "label": ["row%d" % i for i in range(1000)]})
wide = pd.DataFrame(np.arange(5 * 40).reshape(5, 40), columns=["c%d" % i for i in range(40)])
multi = pd.DataFrame(np.arange(6).reshape(3, 2), columns=pd.MultiIndex.from_tuples([("A", "x"), ("A", "y")]))

fig = plt.figure(figsize=(10, 8))
x = np.linspace(0, 10, 500)
for k in range(5):
    plt.plot(x, np.sin(x * (k + 1)) + rng.normal(scale=0.1, size=x.size), label="series %d" % k)
plt.legend(); plt.title("noisy sines")
buf = io.BytesIO()
plt.savefig(buf, format="png", dpi=200)

print(json.dumps({
    "small": small.to_html(),
    "long": long.to_html(),
    "wide": wide.to_html(),
    "describe": long.describe().to_html(),
    "long_repr": long._repr_html_(),
    "multi": multi.to_html(),
    "plain_small": repr(small),
    "png": base64.b64encode(buf.getvalue()).decode(),
}))
`

type fixtureSet struct {
	Small, Long, Wide, Describe, Multi string
	LongRepr                           string `json:"long_repr"`
	PlainSmall                         string `json:"plain_small"`
	PNG                                string
}

var loadFixtures = sync.OnceValues(func() (*fixtureSet, error) {
	out, err := exec.Command(python, "-c", fixtureScript).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, &fixtureError{err, string(ee.Stderr)}
		}
		return nil, err
	}
	var f fixtureSet
	return &f, json.Unmarshal(out, &f)
})

type fixtureError struct {
	err    error
	stderr string
}

func (e *fixtureError) Error() string { return e.err.Error() + ": " + e.stderr }

func fixtures(t *testing.T) *fixtureSet {
	t.Helper()
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s: %v", python, err)
	}
	f, err := loadFixtures()
	if err != nil {
		t.Fatalf("making fixtures with pandas and matplotlib: %v", err)
	}
	return f
}

func display(data map[string]any) kernel.Output {
	return kernel.Output{OutputType: "display_data", Data: data, Metadata: map[string]any{}}
}

func result(data map[string]any) kernel.Output {
	n := 1
	return kernel.Output{OutputType: "execute_result", Data: data, ExecutionCount: &n}
}

func stdout(s string) kernel.Output {
	return kernel.Output{OutputType: "stream", Name: "stdout", Text: s}
}
func stderr(s string) kernel.Output {
	return kernel.Output{OutputType: "stream", Name: "stderr", Text: s}
}

func okResult(outs ...kernel.Output) *kernel.Result {
	return &kernel.Result{Status: kernel.StatusOK, ExecutionCount: 1, Outputs: outs}
}
