package jupyter

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeSpec writes dir/kernels/name/kernel.json.
func writeSpec(t *testing.T, dir, name, kernelJSON string) {
	t.Helper()
	d := filepath.Join(dir, "kernels", name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "kernel.json"), []byte(kernelJSON), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFindKernelSpecs(t *testing.T) {
	const good = `{"argv": ["python3", "-f", "{connection_file}"], "display_name": "Py", "language": "python"}`
	type spec struct{ dir, name, json string }
	tests := []struct {
		name     string
		specs    []spec // dir is "a" or "b", searched in that order
		want     map[string]string
		wantErrs []string // substrings of the error, one per bad spec
	}{
		{
			name:  "good",
			specs: []spec{{"a", "py", good}},
			want:  map[string]string{"py": "a"},
		},
		{
			name:     "malformed json",
			specs:    []spec{{"a", "py", good}, {"a", "broken", `{"argv": [`}},
			want:     map[string]string{"py": "a"},
			wantErrs: []string{"broken"},
		},
		{
			name:     "empty argv",
			specs:    []spec{{"a", "empty", `{"argv": [], "display_name": "E"}`}, {"a", "noargv", `{"display_name": "N"}`}},
			want:     map[string]string{},
			wantErrs: []string{"empty", "noargv"},
		},
		{
			name:  "name clash: the earlier dir wins",
			specs: []spec{{"a", "py", good}, {"b", "py", good}, {"b", "other", good}},
			want:  map[string]string{"py": "a", "other": "b"},
		},
		{
			name:     "a broken spec does not hide a later good one",
			specs:    []spec{{"a", "py", `nope`}, {"b", "py", good}},
			want:     map[string]string{"py": "b"},
			wantErrs: []string{"py"},
		},
		{
			name:  "names are lower-cased",
			specs: []spec{{"a", "MyKernel", good}},
			want:  map[string]string{"mykernel": "a"},
		},
		{
			name:     "bad name or interrupt mode",
			specs:    []spec{{"a", "has space", good}, {"a", "im", `{"argv": ["x"], "interrupt_mode": "shout"}`}},
			want:     map[string]string{},
			wantErrs: []string{"has space", "shout"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dirs := []string{filepath.Join(root, "a"), filepath.Join(root, "b"), filepath.Join(root, "missing")}
			for _, s := range tt.specs {
				writeSpec(t, filepath.Join(root, s.dir), s.name, s.json)
			}
			// A directory without kernel.json is not a spec, nor an error.
			os.MkdirAll(filepath.Join(root, "a", "kernels", "notaspec"), 0o755)

			specs, err := FindKernelSpecs(dirs)
			got := make(map[string]string)
			for name, s := range specs {
				got[name] = filepath.Base(filepath.Dir(filepath.Dir(s.Dir)))
				if s.Name != name || s.InterruptMode == "" {
					t.Errorf("spec %q = %+v", name, s)
				}
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("specs from %v, want %v", got, tt.want)
			}
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if n := len(strings.Split(msg, "\n")); (err != nil) != (len(tt.wantErrs) > 0) || (err != nil && n != len(tt.wantErrs)) {
				t.Errorf("error %q, want %d errors", msg, len(tt.wantErrs))
			}
			for _, w := range tt.wantErrs {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestSystemKernelSpecs(t *testing.T) {
	specs, err := FindKernelSpecs([]string{"/usr/share/jupyter"})
	if err != nil {
		t.Fatal(err)
	}
	py, ok := specs["python3"]
	if !ok {
		t.Fatalf("no python3 in %v", specs)
	}
	if want := []string{"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "/c.json"}; !slices.Equal(py.Command("/c.json"), want) {
		t.Errorf("python3 command %q, want %q", py.Command("/c.json"), want)
	}
	if py.Language != "python" || py.InterruptMode != "signal" || py.Dir != "/usr/share/jupyter/kernels/python3" {
		t.Errorf("python3 = %+v", py)
	}
	ir, ok := specs["ir"]
	if !ok {
		t.Fatalf("no ir in %v", specs)
	}
	if want := []string{"R", "--slave", "-e", "IRkernel::main()", "--args", "/c.json"}; !slices.Equal(ir.Command("/c.json"), want) {
		t.Errorf("ir command %q, want %q", ir.Command("/c.json"), want)
	}
}

func TestCommand(t *testing.T) {
	s := KernelSpec{Argv: []string{"k", "--file={connection_file}", "{resource_dir}/x", "{connection_file}"}}
	want := []string{"k", "--file=/f.json", "{resource_dir}/x", "/f.json"}
	if got := s.Command("/f.json"); !slices.Equal(got, want) {
		t.Errorf("Command = %q, want %q", got, want)
	}
	if s.Argv[1] != "--file={connection_file}" {
		t.Error("Command changed the spec")
	}
}

func TestDataDirs(t *testing.T) {
	t.Setenv("JUPYTER_PATH", "/opt/j1"+string(os.PathListSeparator)+"/opt/j2/"+string(os.PathListSeparator)+"/usr/share/jupyter")
	want := []string{"/opt/j1", "/opt/j2", "/usr/share/jupyter", "/usr/local/share/jupyter"}
	if got := DataDirs(); !slices.Equal(got, want) {
		t.Errorf("DataDirs = %q, want %q", got, want)
	}
	t.Setenv("JUPYTER_PATH", "")
	want = []string{"/usr/local/share/jupyter", "/usr/share/jupyter"}
	if got := DataDirs(); !slices.Equal(got, want) {
		t.Errorf("DataDirs = %q, want %q", got, want)
	}
}
