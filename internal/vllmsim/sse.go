package vllmsim

import (
	"strconv"
	"unicode/utf8"
)

// words is the cycle of generated text: token k (1-based) is words[(k-1)%len].
var words = [...]string{" the", " quick", " brown", " fox", " jumps", " over", " a", " lazy", " dog", "."}

func tokenText(k int) string { return words[(k-1)%len(words)] }

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// sseFramer builds vLLM's streaming frames for one HTTP request. Each append
// method appends one complete frame "data: {...}\n\n" to a caller's buffer, so a
// stream allocates nothing per token.
type sseFramer struct {
	chat   bool
	prefix []byte // `data: {"id":"...","object":"...","created":N,"model":"...","choices":[`
}

func newSSEFramer(chat bool, id, model string, created int64) *sseFramer {
	obj := "text_completion"
	if chat {
		obj = "chat.completion.chunk"
	}
	p := []byte(`data: {"id":`)
	p = appendJSONString(p, id)
	p = append(p, `,"object":"`...)
	p = append(p, obj...)
	p = append(p, `","created":`...)
	p = strconv.AppendInt(p, created, 10)
	p = append(p, `,"model":`...)
	p = appendJSONString(p, model)
	p = append(p, `,"choices":[`...)
	return &sseFramer{chat: chat, prefix: p}
}

// role appends the chat stream's first frame for choice idx: delta.role.
func (f *sseFramer) role(b []byte, idx int) []byte {
	b = append(b, f.prefix...)
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(idx), 10)
	b = append(b, `,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	return b
}

// token appends the frame of one token's text for choice idx; finish is "" or the
// finish reason carried by this (last) frame.
func (f *sseFramer) token(b []byte, idx int, text, finish string) []byte {
	b = append(b, f.prefix...)
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(idx), 10)
	if f.chat {
		b = append(b, `,"delta":{"content":`...)
		b = appendJSONString(b, text)
		b = append(b, `},"logprobs":null,"finish_reason":`...)
	} else {
		b = append(b, `,"text":`...)
		b = appendJSONString(b, text)
		b = append(b, `,"logprobs":null,"finish_reason":`...)
	}
	if finish == "" {
		b = append(b, "null"...)
	} else {
		b = append(b, '"')
		b = append(b, finish...)
		b = append(b, `","stop_reason":null`...)
	}
	b = append(b, "}]}\n\n"...)
	return b
}

// usage appends the include_usage frame: "choices":[] and the usage object.
func (f *sseFramer) usage(b []byte, prompt, completion int) []byte {
	b = append(b, f.prefix...)
	b = append(b, `],"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, "}}\n\n"...)
	return b
}

const doneFrame = "data: [DONE]\n\n"
