package api

// fileTable lists the file plane's routes (v1 /v1/file/..., v2 /v2/fs/...).
func (s *Server) fileTable() []route { return nil }
