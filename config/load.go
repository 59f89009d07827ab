package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Load reads the configuration file at path, applies AGENTQ_REDIS_URL from
// the process environment over it and validates the result. path "" means
// no file: Default with the environment applied.
func Load(path string) (*Config, error) {
	var c *Config
	if path == "" {
		c = Default()
	} else {
		data, err := ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		c, err = parse(data, path)
		if err != nil {
			return nil, err
		}
	}
	c.ApplyEnv(os.Getenv)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// MaxFileSize is the largest configuration file ReadFile reads and Parse
// accepts: 4 MiB, a thousand times a large real config. The YAML decoder
// holds many times a document's size in nodes (a 16 MB file took 1.1 GB),
// so a bigger input is refused before it is decoded.
const MaxFileSize = 4 << 20

// ErrTooLarge is wrapped by the error of ReadFile and Parse for an input
// larger than MaxFileSize; that error wraps ErrInvalid too.
var ErrTooLarge = errors.New("config file too large")

// ReadFile reads the configuration file at path, at most MaxFileSize bytes:
// it reads MaxFileSize+1 bytes at most, so a huge file (or an endless one,
// such as /dev/zero) is refused without being held in memory. The error
// names the file and the limit and wraps ErrTooLarge; an error opening or
// reading the file is the os error (which names the file).
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, tooLarge(path)
	}
	return data, nil
}

func tooLarge(name string) error {
	return fmt.Errorf("%s: more than %d bytes, the 4 MiB limit for a config file: %w (%w)", name, MaxFileSize, ErrTooLarge, ErrInvalid)
}

// Parse decodes and validates a configuration document. name (usually the
// file name) prefixes error messages and becomes Config.Path. Parse does not
// read the environment; see ApplyEnv. Empty input (or only comments) yields
// Default.
//
// Every error wraps ErrInvalid; each problem is a *FieldError naming the
// file, the line and the dotted field. When there are several, they are
// joined (errors.Join) in line order.
func Parse(data []byte, name string) (*Config, error) {
	c, err := parse(data, name)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// maxErrors bounds the number of problems reported for one document.
const maxErrors = 50

// parse decodes data over Default without validating values.
func parse(data []byte, name string) (c *Config, err error) {
	if len(data) > MaxFileSize {
		return nil, tooLarge(name)
	}
	defer func() {
		// yaml.v3 is not known to panic on v3.0.1, but a config parser must
		// never take a process down on bad input.
		if r := recover(); r != nil {
			c, err = nil, &FieldError{File: name, Reason: fmt.Sprintf("cannot parse YAML: %v", r)}
		}
	}()
	c = Default()
	c.Path = name
	c.lines = map[string]int{}

	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return c, nil
		}
		return nil, yamlError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(name, err)
		}
		return nil, &FieldError{File: name, Line: extra.Line, Reason: "more than one YAML document; a config file holds one"}
	}

	d := &decoder{file: name, lines: c.lines, budget: 10000 + 10*len(data)}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return c, nil
		}
		root = root.Content[0]
	}
	d.config(root, c)
	if (c.Redis.Sentinel != nil || c.Redis.Cluster != nil) && !hasLine(c.lines, "redis.url") {
		c.Redis.URL = "" // the seed URL gives way to the file's topology
	}
	if len(d.errs) > 0 {
		return nil, joinFieldErrors(d.errs)
	}
	return c, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// yamlError turns a syntax error of yaml.v3 into a *FieldError.
func yamlError(file string, err error) error {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FieldError{File: file, Line: line, Reason: "invalid YAML: " + m[2]}
	}
	return &FieldError{File: file, Reason: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")}
}

func hasLine(lines map[string]int, path string) bool { _, ok := lines[path]; return ok }
