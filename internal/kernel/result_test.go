package kernel

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestResultAdd(t *testing.T) {
	stream := func(name, text string) Output { return Output{OutputType: "stream", Name: name, Text: text} }
	tests := []struct {
		name      string
		budget    int64
		in        []Output
		want      []Output
		truncated bool
	}{
		{"adjacent streams merge", 100,
			[]Output{stream("stdout", "a"), stream("stdout", "b"), stream("stderr", "c"), stream("stdout", "d")},
			[]Output{stream("stdout", "ab"), stream("stderr", "c"), stream("stdout", "d")}, false},
		{"a flood keeps its start", 5,
			[]Output{stream("stdout", "0123456789")},
			[]Output{stream("stdout", "01234")}, true},
		{"cut never splits a rune", 2,
			[]Output{stream("stdout", "é€")},
			[]Output{stream("stdout", "é")}, true},
		{"an image over budget is dropped whole", 10,
			[]Output{stream("stdout", "hi"), {OutputType: "display_data", Data: map[string]any{"image/png": strings.Repeat("A", 100)}}},
			[]Output{stream("stdout", "hi")}, true},
		{"invalid UTF-8 is replaced", 100,
			[]Output{stream("stdout", "a\xffb")},
			[]Output{stream("stdout", "a\uFFFDb")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newResult(tt.budget)
			for _, o := range tt.in {
				r.add(o)
			}
			r.finish()
			got := r.Outputs
			if tt.truncated {
				last := got[len(got)-1]
				if !r.Truncated || !strings.Contains(last.Text, "output truncated") {
					t.Fatalf("no truncation marker: %+v", got)
				}
				got = got[:len(got)-1]
			} else if r.Truncated {
				t.Fatalf("marked truncated: %+v", got)
			}
			gj, _ := json.Marshal(got)
			wj, _ := json.Marshal(tt.want)
			if string(gj) != string(wj) {
				t.Errorf("outputs\n got %s\nwant %s", gj, wj)
			}
		})
	}
}

func TestOutputJSON(t *testing.T) {
	one := 1
	tests := []struct {
		o    Output
		want string
	}{
		{Output{OutputType: "stream", Name: "stdout"}, `{"name":"stdout","output_type":"stream","text":""}`},
		{Output{OutputType: "error", Ename: "KeyboardInterrupt"}, `{"ename":"KeyboardInterrupt","evalue":"","output_type":"error","traceback":[]}`},
		{Output{OutputType: "execute_result", ExecutionCount: &one, Data: map[string]any{"text/plain": "1"}},
			`{"data":{"text/plain":"1"},"execution_count":1,"metadata":{},"output_type":"execute_result"}`},
		{Output{OutputType: "display_data"}, `{"data":{},"metadata":{},"output_type":"display_data"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.o)
		if err != nil || string(b) != tt.want {
			t.Errorf("%+v: %s, %v; want %s", tt.o, b, err, tt.want)
		}
	}
}

func TestParseLanguage(t *testing.T) {
	for in, want := range map[string]Language{"python": Python, "Python3": Python, "py": Python, "javascript": JavaScript, "node": JavaScript, "JS": JavaScript} {
		if got, err := ParseLanguage(in); err != nil || got != want {
			t.Errorf("ParseLanguage(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseLanguage("ruby"); err == nil || !strings.Contains(err.Error(), "python or javascript") {
		t.Errorf("ParseLanguage(ruby) = %v", err)
	}
}
