package vllmsim

// Prompt is a tokenized prompt as the simulator sees it: a token count and the
// chained hashes of its full KV blocks (len(BlockHashes) == Tokens/BlockSize).
// Hash i depends on every token of blocks 0..i and on the adapter and cache salt the
// prompt was hashed with, as in vLLM's automatic prefix caching.
type Prompt struct {
	Tokens      int
	BlockHashes []uint64
}

// BytesPerToken is the tokenization approximation for text: one token per 4 bytes,
// rounded up.
const BytesPerToken = 4

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h | 1 // never 0: 0 means "no hash" in the KV cache
}

func seedHash(adapter, salt string) uint64 {
	h := uint64(fnvOffset)
	for i := 0; i < len(adapter); i++ {
		h = (h ^ uint64(adapter[i])) * fnvPrime
	}
	h = (h ^ 0xff) * fnvPrime
	for i := 0; i < len(salt); i++ {
		h = (h ^ uint64(salt[i])) * fnvPrime
	}
	return mix64(h)
}

// textHasher hashes a byte stream into chained block hashes.
type textHasher struct {
	blockBytes int
	n          int // bytes seen
	inBlock    int
	h, prev    uint64
	out        []uint64
}

func (t *textHasher) write(s string) {
	for i := 0; i < len(s); i++ {
		t.h = (t.h ^ uint64(s[i])) * fnvPrime
		t.inBlock++
		if t.inBlock == t.blockBytes {
			t.prev = mix64(t.h)
			t.out = append(t.out, t.prev)
			t.h, t.inBlock = t.prev, 0
		}
	}
	t.n += len(s)
}

// HashText tokenizes the concatenation of parts (one token per BytesPerToken bytes,
// rounded up, at least one) and hashes its full blocks of blockSize tokens, seeded
// by adapter ("" for the base model) and salt (the request's cache_salt).
func HashText(blockSize int, adapter, salt string, parts ...string) Prompt {
	s := seedHash(adapter, salt)
	t := textHasher{blockBytes: blockSize * BytesPerToken, h: s, prev: s}
	for _, p := range parts {
		t.write(p)
	}
	tok := (t.n + BytesPerToken - 1) / BytesPerToken
	if tok == 0 {
		tok = 1
	}
	return Prompt{Tokens: tok, BlockHashes: t.out}
}

// HashTokenIDs treats ids as the prompt's tokens (one token per id) and hashes its
// full blocks of blockSize tokens, seeded by adapter and salt.
func HashTokenIDs(blockSize int, adapter, salt string, ids []int64) Prompt {
	h := seedHash(adapter, salt)
	var out []uint64
	in := 0
	for _, id := range ids {
		u := uint64(id)
		for k := 0; k < 8; k++ {
			h = (h ^ (u & 0xff)) * fnvPrime
			u >>= 8
		}
		in++
		if in == blockSize {
			h = mix64(h)
			out = append(out, h)
			in = 0
		}
	}
	n := len(ids)
	if n == 0 {
		n = 1
	}
	return Prompt{Tokens: n, BlockHashes: out}
}
