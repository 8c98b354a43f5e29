package api

// routes registers every route codecell serves. openapi.json documents the
// same list (a test keeps the two equal).
func (s *Server) routes() {
	s.handleServer("GET /health", s.health)
	s.handleServer("POST /v2/sandboxes", s.createSandbox)
	s.handleServer("GET /v2/sandboxes", s.listSandboxes)
	s.handleServer("GET /v2/sandboxes/{sandbox_id}", s.getSandbox)
	s.handleServer("DELETE /v2/sandboxes/{sandbox_id}", s.deleteSandbox)

	// Info.
	s.handle("GET /v1/sandbox", s.sandboxV1)
	s.handle("GET /v2/sandbox", s.sandboxV2)
	s.handle("GET /v1/capabilities", s.capabilitiesV1)

	// Code.
	s.handle("POST /v1/code/execute", s.codeExecuteV1)
	s.handle("GET /v1/code/info", s.codeInfo)
	s.handle("POST /v2/code/execute", s.codeExecuteV2)
	s.handle("GET /v2/code/sessions", s.codeSessions)
	s.handle("POST /v2/code/sessions", s.codeCreateSession)
	s.handle("GET /v2/code/sessions/{session_id}", s.codeGetSession)
	s.handle("DELETE /v2/code/sessions/{session_id}", s.codeDeleteSession)

	// Jupyter.
	s.handle("POST /v1/jupyter/execute", s.jupyterExecute)
	s.handle("POST /v1/jupyter/sessions/create", s.jupyterCreateSession)
	s.handle("GET /v1/jupyter/sessions", s.jupyterSessions)
	s.handle("DELETE /v1/jupyter/sessions", s.jupyterDeleteSessions)
	s.handle("DELETE /v1/jupyter/sessions/{session_id}", s.jupyterDeleteSession)
	s.handle("GET /v1/jupyter/info", s.jupyterInfo)

	// Node.js.
	s.handle("POST /v1/nodejs/execute", s.nodeExecute)
	s.handle("POST /v1/nodejs/sessions", s.nodeCreateSession)
	s.handle("GET /v1/nodejs/sessions", s.nodeSessions)
	s.handle("GET /v1/nodejs/sessions/{session_id}", s.nodeGetSession)
	s.handle("PATCH /v1/nodejs/sessions/{session_id}", s.nodeUpdateSession)
	s.handle("DELETE /v1/nodejs/sessions/{session_id}", s.nodeDeleteSession)
	s.handle("GET /v1/nodejs/info", s.nodeInfo)
}
