package vllmsim

import (
	"encoding/json"
	"net/http"
)

// writeError answers with vLLM's (OpenAI's) error envelope:
// {"error":{"message":...,"type":...,"param":null,"code":status}}.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	type errBody struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   any    `json:"param"`
		Code    int    `json:"code"`
	}
	body, _ := json.Marshal(struct {
		Error errBody `json:"error"`
	}{errBody{Message: msg, Type: typ, Code: status}})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusMethodNotAllowed:
		return "MethodNotAllowedError"
	default:
		return "InternalServerError"
	}
}
