package vllmsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// apiRequest is the subset of vLLM's completion and chat request bodies the
// simulator reads. Unknown fields are ignored, as vLLM does.
type apiRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	Stream              bool            `json:"stream"`
	StreamOptions       *streamOptions  `json:"stream_options"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	IgnoreEOS           bool            `json:"ignore_eos"`
	CacheSalt           string          `json:"cache_salt"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// errBadRequest marks client errors answered with 400.
var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadRequest}, args...)...)
}

// parseAPIRequest decodes body. For chat it renders messages into one prompt; for
// completions it accepts every vLLM prompt shape and returns one Prompt per prompt.
func parseAPIRequest(body []byte, chat bool, blockSize int, adapter func(model string) string) (*apiRequest, []Prompt, error) {
	var req apiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, badRequest("malformed JSON body: %v", err)
	}
	if req.MaxCompletionTokens != nil && req.MaxTokens == nil {
		req.MaxTokens = req.MaxCompletionTokens
	}
	if req.MaxTokens != nil && *req.MaxTokens < 1 {
		return nil, nil, badRequest("max_tokens must be at least 1, got %d.", *req.MaxTokens)
	}
	ad := adapter(req.Model)
	if chat {
		if len(req.Messages) == 0 {
			return nil, nil, badRequest("messages: field required and must not be empty")
		}
		parts := make([]string, 0, 3*len(req.Messages))
		for i, m := range req.Messages {
			text, err := messageText(m.Content)
			if err != nil {
				return nil, nil, badRequest("messages[%d].content: %v", i, err)
			}
			parts = append(parts, "<|"+m.Role+"|>\n", text, "\n")
		}
		return &req, []Prompt{HashText(blockSize, ad, req.CacheSalt, parts...)}, nil
	}
	p := bytes.TrimSpace(req.Prompt)
	if len(p) == 0 || bytes.Equal(p, []byte("null")) {
		return nil, nil, badRequest("prompt: field required")
	}
	switch p[0] {
	case '"':
		var s string
		if err := json.Unmarshal(p, &s); err != nil {
			return nil, nil, badRequest("prompt: %v", err)
		}
		return &req, []Prompt{HashText(blockSize, ad, req.CacheSalt, s)}, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(p, &items); err != nil {
			return nil, nil, badRequest("prompt: %v", err)
		}
		if len(items) == 0 {
			return nil, nil, badRequest("prompt: must not be empty")
		}
		first := bytes.TrimSpace(items[0])
		if len(first) > 0 && (first[0] == '-' || (first[0] >= '0' && first[0] <= '9')) {
			var ids []int64
			if err := json.Unmarshal(p, &ids); err != nil {
				return nil, nil, badRequest("prompt: %v", err)
			}
			return &req, []Prompt{HashTokenIDs(blockSize, ad, req.CacheSalt, ids)}, nil
		}
		out := make([]Prompt, 0, len(items))
		for i, it := range items {
			it = bytes.TrimSpace(it)
			if len(it) == 0 {
				return nil, nil, badRequest("prompt[%d]: empty", i)
			}
			switch it[0] {
			case '"':
				var s string
				if err := json.Unmarshal(it, &s); err != nil {
					return nil, nil, badRequest("prompt[%d]: %v", i, err)
				}
				out = append(out, HashText(blockSize, ad, req.CacheSalt, s))
			case '[':
				var ids []int64
				if err := json.Unmarshal(it, &ids); err != nil {
					return nil, nil, badRequest("prompt[%d]: %v", i, err)
				}
				if len(ids) == 0 {
					return nil, nil, badRequest("prompt[%d]: must not be empty", i)
				}
				out = append(out, HashTokenIDs(blockSize, ad, req.CacheSalt, ids))
			default:
				return nil, nil, badRequest("prompt[%d]: must be a string or a list of token ids", i)
			}
		}
		return &req, out, nil
	default:
		return nil, nil, badRequest("prompt: must be a string, a list of strings, a list of token ids or a list of such lists")
	}
}

// messageText returns a message content's text: the string, or the concatenated
// text parts of a list of parts. A null content is empty.
func messageText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("must be a string or a list of content parts")
	}
	var b []byte
	for _, p := range parts {
		if p.Type == "text" {
			b = append(b, p.Text...)
		}
	}
	return string(b), nil
}
