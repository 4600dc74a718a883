package route

import (
	"bytes"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds the byte-level JSON scanning Extract is built on. Every
// function walks the bytes it is given at most once, without recursion and
// without allocating (but for appending to the caller's buffer), so that its
// cost is linear in its input whatever the nesting, and nothing of the body
// is kept.

// Byte classes of the scanner.
var (
	// scalarByte: bytes of numbers and of true, false, null.
	scalarByte [256]bool
	// innerByte: bytes skipped inside containers between strings and
	// brackets (scalars, separators, whitespace).
	innerByte [256]bool
)

func init() {
	for _, c := range []byte("0123456789+-.eEabcdfghijklmnopqrstuvwxyzABCDFGHIJKLMNOPQRSTUVWXYZ") {
		scalarByte[c] = true
		innerByte[c] = true
	}
	for _, c := range []byte(" \t\r\n,:") {
		innerByte[c] = true
	}
}

func indexByte(b []byte, c byte) int { return bytes.IndexByte(b, c) }

// skipWS returns the index of the first non-whitespace byte of b at or
// after i.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just past the string starting at b[i] ('"').
func skipString(b []byte, i int) (int, bool) {
	j := i + 1
	// Short strings (keys, roles) end before IndexByte's call pays off.
	for end := min(j+16, len(b)); j < end; j++ {
		switch b[j] {
		case '"':
			return j + 1, true
		case '\\':
			goto slow
		}
	}
slow:
	for {
		k := indexByte(b[j:], '"')
		if k < 0 {
			return 0, false
		}
		q := j + k
		bs := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			bs++
		}
		if bs%2 == 0 {
			return q + 1, true
		}
		j = q + 1
	}
}

// skipValue returns the index just past the value starting at b[i]. Inside
// containers it checks that brackets balance and strings close, with a
// depth counter (no recursion), not the full grammar.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
	default:
		j := i
		for j < len(b) && scalarByte[b[j]] {
			j++
		}
		return j, j > i
	}
	depth := 0
	j := i
	for j < len(b) {
		switch c := b[j]; {
		case c == '"':
			e, ok := skipString(b, j)
			if !ok {
				return 0, false
			}
			j = e
		case c == '{' || c == '[':
			depth++
			j++
		case c == '}' || c == ']':
			depth--
			j++
			if depth == 0 {
				return j, true
			}
		case innerByte[c]:
			j++
			for j < len(b) && innerByte[b[j]] {
				j++
			}
		default:
			return 0, false
		}
	}
	return 0, false
}

// objectGet returns the first values of keys k1 and k2 (nil when absent)
// in the JSON object that starts at b[0] ('{'), and the index just past it;
// b may run past the object. ok is false when the object is malformed. Keys
// are compared raw: an escaped key matches neither.
func objectGet(b []byte, k1, k2 string) (v1, v2 []byte, end int, ok bool) {
	i := skipWS(b, 1)
	if i < len(b) && b[i] == '}' {
		return nil, nil, i + 1, true
	}
	for i < len(b) && b[i] == '"' {
		ke, ok := skipString(b, i)
		if !ok {
			return nil, nil, 0, false
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return nil, nil, 0, false
		}
		i = skipWS(b, i+1)
		ve, ok := skipValue(b, i)
		if !ok {
			return nil, nil, 0, false
		}
		switch {
		case v1 == nil && string(key) == k1:
			v1 = b[i:ve]
		case v2 == nil && k2 != "" && string(key) == k2:
			v2 = b[i:ve]
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return nil, nil, 0, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return v1, v2, i + 1, true
		default:
			return nil, nil, 0, false
		}
	}
	return nil, nil, 0, false
}

// stringBody returns the bytes between the quotes of a JSON string value,
// or ok false when v is not a string.
func stringBody(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	return v[1 : len(v)-1], true
}

// appendUnescaped appends the unescaped text of a raw JSON string body to
// dst while len(dst) < limit, and returns the text's whole unescaped length
// (counted to the end, copied only to the limit). Escapes decode as JSON
// defines them (\uXXXX as UTF-8, surrogate pairs joined, a lone surrogate
// as U+FFFD); an invalid escape is kept as written.
func appendUnescaped(dst, raw []byte, limit int) ([]byte, int) {
	n := 0
	for len(raw) > 0 {
		k := indexByte(raw, '\\')
		if k < 0 {
			k = len(raw)
		}
		if k > 0 {
			if room := limit - len(dst); room > 0 {
				dst = append(dst, raw[:min(k, room)]...)
			}
			n += k
			raw = raw[k:]
			continue
		}
		// A run of escapes, decoded without searching again.
		for len(raw) > 0 && raw[0] == '\\' {
			var piece [4]byte
			pn, used := unescapeOne(raw, &piece)
			if len(dst) < limit {
				dst = append(dst, piece[:pn]...)
			}
			n += pn
			raw = raw[used:]
		}
	}
	return dst, n
}

// unescapedLen returns the length of a raw JSON string body once unescaped.
func unescapedLen(raw []byte) int {
	_, n := appendUnescaped(nil, raw, 0)
	return n
}

// unescapeOne decodes the escape at the start of raw (raw[0] == '\\') into
// out and returns its length and the raw bytes it used.
func unescapeOne(raw []byte, out *[4]byte) (n, used int) {
	if len(raw) < 2 {
		out[0] = '\\'
		return 1, 1
	}
	switch raw[1] {
	case '"', '\\', '/':
		out[0] = raw[1]
	case 'b':
		out[0] = '\b'
	case 'f':
		out[0] = '\f'
	case 'n':
		out[0] = '\n'
	case 'r':
		out[0] = '\r'
	case 't':
		out[0] = '\t'
	case 'u':
		r, ok := hex4(raw[2:])
		if !ok {
			out[0], out[1] = raw[0], raw[1]
			return 2, 2
		}
		used = 6
		if utf16.IsSurrogate(r) {
			r2, ok2 := rune(0), false
			if len(raw) >= 12 && raw[6] == '\\' && raw[7] == 'u' {
				r2, ok2 = hex4(raw[8:])
			}
			if d := utf16.DecodeRune(r, r2); ok2 && d != utf8.RuneError {
				r, used = d, 12
			} else {
				r = utf8.RuneError
			}
		}
		return utf8.EncodeRune(out[:], r), used
	default:
		out[0], out[1] = raw[0], raw[1]
		return 2, 2
	}
	return 1, 2
}

// hex4 decodes four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendCompact appends the JSON text v without whitespace outside strings
// to dst while len(dst) < limit.
func appendCompact(dst, v []byte, limit int) []byte {
	for i := 0; i < len(v) && len(dst) < limit; {
		switch c := v[i]; c {
		case ' ', '\t', '\r', '\n':
			i++
		case '"':
			e, ok := skipString(v, i)
			if !ok {
				return dst
			}
			dst = append(dst, v[i:min(e, i+limit-len(dst))]...)
			i = e
		default:
			dst = append(dst, c)
			i++
		}
	}
	return dst
}

// appendMessages appends the prefix text of the chat messages array that
// starts at b[0] (each message's role, ':', its text, '\n'; see
// appendMessage) to dst while len(dst) < limit. It returns the length of
// that text over every message and the index just past the array (-1 if
// malformed). Each message is walked once.
func appendMessages(dst, b []byte, limit int) ([]byte, int, int) {
	chars := 0
	i := skipWS(b, 1)
	if i < len(b) && b[i] == ']' {
		return dst, 0, i + 1
	}
	for i < len(b) {
		var e int
		if b[i] == '{' {
			var n int
			var ok bool
			dst, n, e, ok = appendMessage(dst, b[i:], limit)
			if !ok {
				return dst, chars, -1
			}
			e += i
			chars += n
		} else {
			var ok bool
			if e, ok = skipValue(b, i); !ok {
				return dst, chars, -1
			}
			chars += 2
		}
		if len(dst) < limit {
			dst = append(dst, '\n')
		}
		i = skipWS(b, e)
		if i >= len(b) {
			return dst, chars, -1
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return dst, chars, i + 1
		default:
			return dst, chars, -1
		}
	}
	return dst, chars, -1
}

// appendMessage appends one chat message's prefix text (role, ':', text;
// the caller adds '\n') from the object that starts at b[0] to dst while
// len(dst) < limit, in one walk whatever the order of its keys: a role read
// after the content is rotated in front of it. It returns the message's
// text length (with role, separator and newline) and the index just past
// the object.
func appendMessage(dst, b []byte, limit int) (out []byte, chars, end int, ok bool) {
	start := len(dst)
	active := start < limit
	chars = 2
	var roleSeen, contentSeen bool
	i := skipWS(b, 1)
	if i < len(b) && b[i] == '}' {
		return dst, chars, i + 1, true
	}
	for i < len(b) && b[i] == '"' {
		ke, ok := skipString(b, i)
		if !ok {
			return dst, 0, 0, false
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return dst, 0, 0, false
		}
		i = skipWS(b, i+1)
		if i >= len(b) {
			return dst, 0, 0, false
		}
		ve := -1
		switch {
		case !roleSeen && string(key) == "role":
			roleSeen = true
			if b[i] != '"' {
				break
			}
			if ve, ok = skipString(b, i); !ok {
				return dst, 0, 0, false
			}
			rb := b[i+1 : ve-1]
			if !active {
				chars += unescapedLen(rb)
				break
			}
			// The role goes first: append it (bounded), then rotate it in
			// front of any content already appended.
			dst = dst[:min(len(dst), limit)]
			body := len(dst) - start
			var n int
			dst, n = appendUnescaped(dst, rb, len(dst)+limit-start)
			dst = append(dst, ':')
			chars += n
			rotateLeft(dst[start:], body)
		case !contentSeen && string(key) == "content":
			contentSeen = true
			var n int
			switch b[i] {
			case '"':
				if ve, ok = skipString(b, i); !ok {
					return dst, 0, 0, false
				}
				dst, n = appendUnescaped(dst, b[i+1:ve-1], limit)
			case '[':
				if dst, n, ve = appendParts(dst, b[i:], limit); ve < 0 {
					return dst, 0, 0, false
				}
				ve += i
			}
			chars += n
		}
		if ve < 0 {
			if ve, ok = skipValue(b, i); !ok {
				return dst, 0, 0, false
			}
		}
		i = skipWS(b, ve)
		if i >= len(b) {
			return dst, 0, 0, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return dst, chars, i + 1, true
		default:
			return dst, 0, 0, false
		}
	}
	return dst, 0, 0, false
}

// rotateLeft moves b[k:] in front of b[:k], in place.
func rotateLeft(b []byte, k int) {
	if k <= 0 || k >= len(b) {
		return
	}
	slices.Reverse(b[:k])
	slices.Reverse(b[k:])
	slices.Reverse(b)
}

// appendParts appends the "text" of each part of the content array that
// starts at b[0] to dst while len(dst) < limit, in one walk. It returns the
// text's whole length and the index just past the array (-1 if malformed).
func appendParts(dst, b []byte, limit int) ([]byte, int, int) {
	chars := 0
	i := skipWS(b, 1)
	if i < len(b) && b[i] == ']' {
		return dst, 0, i + 1
	}
	for i < len(b) {
		var e int
		var ok bool
		if b[i] == '{' {
			var text []byte
			if text, _, e, ok = objectGet(b[i:], "text", ""); !ok {
				return dst, chars, -1
			}
			e += i
			if s, ok := stringBody(text); ok {
				var n int
				dst, n = appendUnescaped(dst, s, limit)
				chars += n
			}
		} else if e, ok = skipValue(b, i); !ok {
			return dst, chars, -1
		}
		i = skipWS(b, e)
		if i >= len(b) {
			return dst, chars, -1
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return dst, chars, i + 1
		default:
			return dst, chars, -1
		}
	}
	return dst, chars, -1
}

// promptArrayTokens estimates the tokens of a non-string prompt, the array
// that starts at b[0]: a list of token ids counts one token per id; a batch
// (a list of strings or of token-id lists) counts all of its prompts. It
// walks the array once, with inline loops for ids (token-id lists are
// long), and returns the index just past it (-1 if malformed).
func promptArrayTokens(b []byte) (n, end int) {
	for i := 1; i < len(b); {
		if c := b[i]; c >= '0' && c <= '9' {
			// The common case first: an id and its comma.
			n++
			for i++; i < len(b) && scalarByte[b[i]]; i++ {
			}
			if i < len(b) && b[i] == ',' {
				i++
			}
			continue
		}
		switch c := b[i]; {
		case c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case c == ']':
			return n, i + 1
		case scalarByte[c]:
			if c >= '0' && c <= '9' || c == '-' {
				n++
			}
			for i++; i < len(b) && scalarByte[b[i]]; i++ {
			}
		case c == '"':
			e, ok := skipString(b, i)
			if !ok {
				return n, -1
			}
			chars := unescapedLen(b[i+1 : e-1])
			n += (chars + charsPerToken - 1) / charsPerToken
			i = e
		case c == '[':
			e, ok := skipValue(b, i)
			if !ok {
				return n, -1
			}
			n += countElements(b[i:e])
			i = e
		default:
			e, ok := skipValue(b, i)
			if !ok {
				return n, -1
			}
			i = e
		}
	}
	return n, -1
}

// countElements counts the elements of a JSON array in one pass.
func countElements(arr []byte) int {
	n := 0
	for i := 1; i < len(arr); {
		switch c := arr[i]; {
		case c == ',' || c == ' ' || c == '\t' || c == '\r' || c == '\n':
			i++
		case c == ']':
			return n
		case scalarByte[c]:
			n++
			for i++; i < len(arr) && scalarByte[arr[i]]; i++ {
			}
		default:
			n++
			e, ok := skipValue(arr, i)
			if !ok {
				return n
			}
			i = e
		}
	}
	return n
}
