package main

import (
	"bytes"
	"strconv"
)

// Limits a hostile client meets (the spike's stand-ins for route's).
const (
	maxHead = 16 << 10 // request or response head; longer: 431 / 502
	maxBody = 1 << 20  // request body; longer: 413
)

var (
	crlfcrlf = []byte("\r\n\r\n")

	resp400 = errResp(400, "Bad Request", "malformed request head", "BadRequestError")
	resp413 = errResp(413, "Request Entity Too Large", "request body too large", "BadRequestError")
	resp431 = errResp(431, "Request Header Fields Too Large", "request head too large", "BadRequestError")
	resp501 = errResp(501, "Not Implemented", "transfer-encoding not supported by the spike", "NotImplementedError")
	resp502 = errResp(502, "Bad Gateway", "upstream failed", "BadGatewayError")
)

// errResp is a closing answer with the error envelope probegate sends
// (OpenAI's, as vLLM sends it).
func errResp(code int, reason, msg, typ string) []byte {
	body := `{"error":{"message":"` + msg + `","type":"` + typ + `","param":null,"code":` + strconv.Itoa(code) + `}}`
	return []byte("HTTP/1.1 " + strconv.Itoa(code) + " " + reason + "\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body)
}

// head is what the proxy needs from a message head.
type head struct {
	size    int  // bytes of the head, through the blank line
	length  int  // Content-Length (0 when absent)
	close   bool // Connection: close
	chunked bool // a Transfer-Encoding field (the spike does not frame it)
}

// parse outcomes
const (
	headMore = iota // no blank line yet
	headOK
	headBad     // malformed framing
	headTooLong // longer than maxHead without a blank line
)

// parseHead frames the message head at the start of b: it finds the blank
// line and reads the three fields that decide framing and reuse. Other
// fields are relayed untouched.
func parseHead(b []byte, h *head) int {
	end := bytes.Index(b, crlfcrlf)
	if end < 0 {
		if len(b) > maxHead {
			return headTooLong
		}
		return headMore
	}
	if end+4 > maxHead {
		return headTooLong
	}
	*h = head{size: end + 4}
	sawLength := false
	// skip the start line
	i := bytes.IndexByte(b[:end+2], '\n') + 1
	for i < end+2 {
		j := bytes.IndexByte(b[i:end+2], '\n')
		line := b[i : i+j] // without '\n'
		i += j + 1
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		c := bytes.IndexByte(line, ':')
		if c <= 0 {
			return headBad
		}
		name, val := line[:c], bytes.TrimSpace(line[c+1:])
		switch {
		case fold(name, "content-length"):
			n, ok := atoi(val)
			if !ok || (sawLength && n != h.length) {
				return headBad
			}
			h.length, sawLength = n, true
		case fold(name, "transfer-encoding"):
			h.chunked = true
		case fold(name, "connection"):
			h.close = fold(val, "close")
		}
	}
	return headOK
}

// fold reports whether b equals the lower-case s, ASCII case folded.
func fold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
