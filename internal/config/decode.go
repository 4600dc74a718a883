package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Load reads the YAML file at path and returns the Config it describes, as
// Parse does. A file that cannot be read yields a wrapped *os.PathError;
// content problems yield Errors, unwrapped, so that callers can list them.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data)
}

// Parse decodes data, a single YAML document, over Default() and validates
// the result. Decoding is strict: unknown or duplicated keys, values of the
// wrong type and malformed durations are problems named by their YAML path
// (`unknown key probe.dedline`, `route.d: must be an integer or auto`). A
// key whose value is null (`d:` or `d: ~`) keeps its default. An integer
// key whose default is a rule (route.d, probe.quorum: struct tag auto)
// also takes the string auto.
//
// On success Parse returns a valid Config and a nil error. Otherwise it
// returns nil and an Errors holding every decoding problem together with
// every validation problem at paths that decoded cleanly. Parse never
// panics, whatever data holds.
func Parse(data []byte) (*Config, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, Errors{{Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, Errors{{Msg: "config must be a single YAML document"}}
	}

	c := Default()
	d := decoder{}
	n := &root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind != 0 && n.Kind != yaml.DocumentNode {
		d.value("", n, reflect.ValueOf(c).Elem())
	}

	probs := d.probs
	for _, p := range validate(c) {
		if !d.failed(p.Path) {
			probs = append(probs, p)
		}
	}
	if len(probs) > 0 {
		return nil, probs
	}
	return c, nil
}

// decoder walks a yaml.Node tree against the Config struct, collecting
// problems rather than stopping at the first.
type decoder struct {
	probs Errors
}

var durationType = reflect.TypeFor[Duration]()

func (d *decoder) add(path, format string, args ...any) {
	d.probs = append(d.probs, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// failed reports whether decoding already found a problem at path or below
// it, so that validation does not repeat it.
func (d *decoder) failed(path string) bool {
	for _, p := range d.probs {
		if p.Path == path || strings.HasPrefix(p.Path, path+".") || strings.HasPrefix(p.Path, path+"[") {
			return true
		}
	}
	return false
}

// resolve follows aliases; a chain of aliases is bounded by the parser.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// value decodes n into v, whose type is one of those used by Config.
func (d *decoder) value(path string, n *yaml.Node, v reflect.Value) {
	n = resolve(n)
	if n.Kind == yaml.AliasNode {
		d.add(path, "unresolvable alias")
		return
	}
	if isNull(n) {
		if v.Kind() == reflect.Slice {
			v.SetZero()
		}
		return // keep the default
	}
	if v.Type() == durationType {
		dur, err := parseDuration(n)
		if err != nil {
			d.add(path, "%s", err.Error())
			return
		}
		v.SetInt(int64(dur))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.mapping(path, n, v)
	case reflect.Slice: // []string
		if n.Kind != yaml.SequenceNode {
			d.add(path, "must be a list")
			return
		}
		if len(n.Content) == 0 {
			v.SetZero() // an empty list decodes to nil, like an absent one
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			d.value(fmt.Sprintf("%s[%d]", path, i), e, s.Index(i))
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.add(path, "must be a string")
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.add(path, "must be true or false")
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			d.add(path, "must be an integer")
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") || n.Decode(&f) != nil {
			d.add(path, "must be a number")
			return
		}
		v.SetFloat(f)
	default:
		panic(fmt.Sprintf("config: no decoder for %s at %s", v.Type(), path))
	}
}

// mapping decodes a YAML mapping into the struct v, field by yaml tag.
func (d *decoder) mapping(path string, n *yaml.Node, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		if path == "" {
			d.add(path, "config must be a mapping of sections (server:, backends:, ...)")
		} else {
			d.add(path, "must be a mapping")
		}
		return
	}
	fields := fieldsOf(v.Type())
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := resolve(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.add(path, "keys must be strings")
			continue
		}
		p := join(path, k.Value)
		if k.Value == "<<" {
			d.add(p, "merge keys are not supported")
			continue
		}
		idx, ok := fields[k.Value]
		if !ok {
			msg := "unknown key " + p
			if s := suggest(path, k.Value, fields); s != "" {
				msg += " (did you mean " + s + "?)"
			}
			d.probs = append(d.probs, Problem{Path: p, Msg: msg, key: true})
			continue
		}
		if seen[k.Value] {
			d.probs = append(d.probs, Problem{Path: p, Msg: "duplicate key " + p, key: true})
			continue
		}
		seen[k.Value] = true
		if auto, ok := v.Type().Field(idx).Tag.Lookup("auto"); ok {
			// An integer key whose default is a rule: `key: auto` sets
			// the value the auto tag names (e.g. route.d's 0).
			if sv := resolve(val); sv.Kind == yaml.ScalarNode && sv.ShortTag() == "!!str" {
				if sv.Value != "auto" {
					d.add(p, "must be an integer or auto")
					continue
				}
				n, err := strconv.ParseInt(auto, 10, 64)
				if err != nil {
					panic(fmt.Sprintf("config: bad auto tag %q on %s", auto, p))
				}
				v.Field(idx).SetInt(n)
				continue
			}
		}
		d.value(p, val, v.Field(idx))
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fieldsOf maps yaml key names to field indexes of the struct type t.
func fieldsOf(t reflect.Type) map[string]int {
	m := make(map[string]int, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			m[name] = i
		}
	}
	return m
}

// allPaths lists every leaf and section path of Config, for suggestions.
func allPaths() []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for name, i := range fieldsOf(t) {
			p := join(prefix, name)
			out = append(out, p)
			if ft := t.Field(i).Type; ft.Kind() == reflect.Struct && ft != durationType {
				walk(p, ft)
			}
		}
	}
	walk("", reflect.TypeFor[Config]())
	return out
}

// suggest returns the most likely intended path for the unknown key under
// path: a sibling within a small edit distance, else the only key of that
// name in another section, else "".
func suggest(path, key string, siblings map[string]int) string {
	best, bestDist := "", 0
	limit := max(1, len(key)/3)
	for name := range siblings {
		dist := editDistance(key, name)
		if dist <= limit && (best == "" || dist < bestDist || dist == bestDist && name < best) {
			best, bestDist = name, dist
		}
	}
	if best != "" {
		return join(path, best)
	}
	var found []string
	for _, p := range allPaths() {
		if p == key || strings.HasSuffix(p, "."+key) {
			found = append(found, p)
		}
	}
	if len(found) == 1 {
		return found[0]
	}
	return ""
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b))
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
