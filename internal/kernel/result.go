package kernel

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Output is one Jupyter output: output_type is stream, execute_result,
// display_data or error. Images in Data are bare base64 (no data: prefix).
type Output struct {
	OutputType     string         `json:"output_type"`
	Name           string         `json:"name,omitempty"`
	Text           string         `json:"text,omitempty"`
	Data           map[string]any `json:"data,omitempty"`
	Metadata       map[string]any `json:"metadata,omitempty"`
	ExecutionCount *int           `json:"execution_count,omitempty"`
	Ename          string         `json:"ename,omitempty"`
	Evalue         string         `json:"evalue,omitempty"`
	Traceback      []string       `json:"traceback,omitempty"`
}

// V1 returns o with the nine keys of the AIO v1 output schema, null where
// its type does not use them.
func (o Output) V1() map[string]any {
	m := map[string]any{"output_type": o.OutputType, "name": nil, "text": nil, "data": nil, "metadata": nil,
		"execution_count": nil, "ename": nil, "evalue": nil, "traceback": nil}
	switch o.OutputType {
	case "stream":
		m["name"], m["text"] = o.Name, o.Text
	case "error":
		m["ename"], m["evalue"], m["traceback"] = o.Ename, o.Evalue, nonNil(o.Traceback)
	default:
		m["data"], m["metadata"] = nonNilMap(o.Data), nonNilMap(o.Metadata)
		if o.ExecutionCount != nil {
			m["execution_count"] = *o.ExecutionCount
		}
	}
	return m
}

// MarshalJSON writes only the keys the output's type uses, as Jupyter does
// (and the AIO v2 API): an error keeps an empty evalue, a stream an empty text.
func (o Output) MarshalJSON() ([]byte, error) {
	m := o.V1()
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	return json.Marshal(m)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// Result is what one cell produced.
type Result struct {
	Status         string   `json:"status"` // ok, error or timeout
	ExecutionCount int      `json:"execution_count"`
	Outputs        []Output `json:"outputs"`
	Truncated      bool     `json:"truncated,omitempty"`
	Usage          Usage    `json:"-"`
	// Died is set when the kernel ended during the cell; it cannot run more.
	Died bool `json:"-"`
	// Started is set once the kernel began running the cell: a kernel that
	// Died without it never ran any of the cell's code.
	Started bool `json:"-"`

	limit   int64 // output bytes per cell
	budget  int64 // output bytes left
	dropped int64
	// onOutput, if set, sees each output as it is kept (before adjacent
	// stream text is merged), the truncation marker included.
	onOutput func(Output)
}

func newResult(budget int64) *Result {
	return &Result{Status: StatusOK, Outputs: []Output{}, limit: budget, budget: budget}
}

// add appends an output within the budget, merging adjacent stream text of
// the same stream as Jupyter front ends do. The server does not rely on the
// driver's own cap: a forged driver cannot make it hold more than the budget.
func (r *Result) add(o Output) {
	o.Text = validUTF8(o.Text)
	size := int64(len(o.Text) + len(o.Evalue))
	for _, l := range o.Traceback {
		size += int64(len(l))
	}
	for _, v := range o.Data {
		if s, ok := v.(string); ok {
			size += int64(len(s))
		} else {
			b, _ := json.Marshal(v)
			size += int64(len(b))
		}
	}
	if size > r.budget {
		if o.OutputType == "stream" && r.budget > 0 {
			// Keep what fits of a stream: the start of a flood is the useful part.
			cut := o.Text[:r.budget]
			for !utf8.ValidString(cut) {
				cut = cut[:len(cut)-1]
			}
			r.dropped += size - int64(len(cut))
			o.Text = cut
			size = int64(len(cut))
		} else {
			r.dropped += size
			return
		}
	}
	r.budget -= size
	if r.onOutput != nil {
		r.onOutput(o)
	}
	if n := len(r.Outputs); n > 0 && o.OutputType == "stream" {
		if last := &r.Outputs[n-1]; last.OutputType == "stream" && last.Name == o.Name {
			last.Text += o.Text
			return
		}
	}
	r.Outputs = append(r.Outputs, o)
}

func (r *Result) addDeath(why error, interrupted bool) {
	r.Died = true
	r.Status = StatusError
	ename := EnameKernelDied
	switch {
	case why == errOOM:
		ename = EnameOutOfMemory
	case interrupted:
		r.Status = StatusTimeout
		ename = EnameTimeout
		why = fmt.Errorf("the cell did not stop when interrupted at its timeout, so the kernel was killed; its state is lost")
	}
	r.budget += 1 << 10 // the reason is always reported
	r.add(Output{OutputType: "error", Ename: ename, Evalue: why.Error(), Traceback: []string{ename + ": " + why.Error()}})
}

// finish marks truncation visibly, in the outputs themselves.
func (r *Result) finish() *Result {
	if r.dropped > 0 {
		r.Truncated = true
		marker := Output{OutputType: "stream", Name: "stderr",
			Text: fmt.Sprintf("\n[codecell: output truncated: %d bytes dropped; the limit is %d bytes per cell. Write large results to a file and read it in parts.]\n",
				r.dropped, r.limit)}
		r.Outputs = append(r.Outputs, marker)
		if r.onOutput != nil {
			r.onOutput(marker)
		}
	}
	return r
}

func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Text returns the concatenated text of the named stream.
func (r *Result) Text(stream string) string {
	var b strings.Builder
	for _, o := range r.Outputs {
		if o.OutputType == "stream" && o.Name == stream {
			b.WriteString(o.Text)
		}
	}
	return b.String()
}

// Death is the error output saying why the kernel died during the cell
// (its Ename is EnameOutOfMemory, EnameTimeout or EnameKernelDied), or nil
// if it did not. An error the cell raised itself, whatever its name, is not
// a death. A nil Result has none.
func (r *Result) Death() *Output {
	if r == nil || !r.Died {
		return nil
	}
	for i := len(r.Outputs) - 1; i >= 0; i-- { // addDeath's output comes last
		if r.Outputs[i].OutputType == "error" {
			return &r.Outputs[i]
		}
	}
	return nil
}

// Error returns the first error output, or nil.
func (r *Result) Error() *Output {
	for i := range r.Outputs {
		if r.Outputs[i].OutputType == "error" {
			return &r.Outputs[i]
		}
	}
	return nil
}
