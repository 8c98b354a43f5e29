package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
)

// GET /openapi.json: every route codecell serves, from the routing table.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	s.docOnce.Do(func() { s.doc, _ = json.Marshal(s.openAPIDoc()) })
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.doc)
	return nil
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

func (s *Server) openAPIDoc() map[string]any {
	paths := map[string]map[string]any{}
	add := func(method, path string, r route) {
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": schema{"type": "string"}})
		}
		for _, q := range r.query {
			params = append(params, map[string]any{"name": q.name, "in": "query", "required": q.required,
				"description": q.doc, "schema": schema{"type": q.typ}})
		}
		op := map[string]any{
			"summary":     r.summary,
			"operationId": strings.ToLower(method) + strings.NewReplacer("/", "_", "{", "", "}", "", ".", "_").Replace(path),
			"responses":   responses(r),
		}
		if params != nil {
			op["parameters"] = params
		}
		if r.body != nil {
			ct := "application/json"
			if strings.HasSuffix(path, "/upload") {
				ct = "multipart/form-data"
			}
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{ct: map[string]any{"schema": r.body}}}
		}
		if r.pattern != "GET /health" {
			op["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{"apiKey": []string{}}}
		}
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = op
	}
	for _, r := range s.table() {
		method, path, _ := strings.Cut(r.pattern, " ")
		add(method, path, r)
		if r.sb != nil {
			add(method, "/sandboxes/{sandbox_id}"+path, r)
		}
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "codecell",
			"version":     s.cfg.Version,
			"description": "Runs Python and JavaScript in Linux sandboxes. Compatible with the AIO Sandbox API: every sandbox route is served for the default sandbox and under /sandboxes/{sandbox_id}.",
		},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer"},
				"apiKey": map[string]any{"type": "apiKey", "in": "header", "name": "X-API-Key"},
			},
			"schemas": map[string]any{
				"Envelope": obj("success*", boolT("false for an exception or timeout in the code"), "message*", strT(""), "data*", schema{}),
				"Error": obj("success*", boolT("always false"), "message*", strT(""), "detail*",
					schema{"description": "the message, or for 422 a list of {loc, msg, type}"}),
			},
		},
	}
}

func responses(r route) map[string]any {
	ok := map[string]any{"description": "OK"}
	if r.raw != "" {
		ok["content"] = map[string]any{r.raw: map[string]any{}}
	} else {
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": schema{"$ref": "#/components/schemas/Envelope"}}}
	}
	errRef := map[string]any{"application/json": map[string]any{"schema": schema{"$ref": "#/components/schemas/Error"}}}
	out := map[string]any{"200": ok}
	for code, desc := range map[string]string{
		"401": "missing or wrong API key", "404": "unknown sandbox, session or file", "413": "body too large",
		"422": "missing or mistyped field", "429": "session or sandbox capacity reached",
		"503": "no interpreter for the language", "507": "disk quota reached",
	} {
		if code == "401" && r.pattern == "GET /health" {
			continue
		}
		out[code] = map[string]any{"description": desc, "content": errRef}
	}
	return out
}

// docCache is filled on first use.
type docCache struct {
	docOnce sync.Once
	doc     []byte
}
