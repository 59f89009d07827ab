package api

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentq/agentq/deadletter"
	"github.com/agentq/agentq/internal/breaker"
	"github.com/agentq/agentq/internal/inspect"
	"github.com/agentq/agentq/internal/limit"
	"github.com/agentq/agentq/internal/schedule"
	"github.com/agentq/agentq/internal/usage"
	"github.com/agentq/agentq/tasks"
)

// TestOpenAPISchemasDocumentEveryField: every JSON field the API answers
// with is a property of its schema in api/openapi.yaml, so that a client
// generated from the document sees, e.g., a dead letter's "run" (which a
// requeue may name) and a task's "queue". The Go types are those the
// handlers encode.
func TestOpenAPISchemasDocumentEveryField(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(openAPIDoc, &doc))
	for schema, v := range map[string]any{
		"Task":        tasks.View{},
		"Event":       tasks.Event{},
		"DeadLetter":  deadletter.Entry{},
		"Agent":       inspect.AgentSummary{},
		"Limits":      limit.Status{},
		"Probe":       breaker.ProbeStatus{},
		"Worker":      inspect.WorkerInfo{},
		"WorkerTask":  inspect.WorkerTask{},
		"Tenant":      inspect.Tenant{},
		"Schedule":    schedule.Status{},
		"UsageReport": usage.Report{},
		"UsageGroup":  usage.Group{},
		"UsageHour":   usage.HourTotal{},
		"UsageCounts": usage.Counts{},
	} {
		s, ok := doc.Components.Schemas[schema]
		require.True(t, ok, "schema %s is documented", schema)
		var missing []string
		for _, f := range jsonFields(reflect.TypeOf(v)) {
			if _, ok := s.Properties[f]; !ok {
				missing = append(missing, f)
			}
		}
		sort.Strings(missing)
		require.Empty(t, missing, "schema %s lacks fields the API sends", schema)
	}
}

// TestOpenAPITaskRequestDocumentsEveryField: every field a task of POST
// /api/v1/tasks may carry (tasks.Request, which the handler decodes
// refusing unknown fields) is a property of TaskRequest, tenant and
// priority among them.
func TestOpenAPITaskRequestDocumentsEveryField(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	require.NoError(t, yaml.Unmarshal(openAPIDoc, &doc))
	props := doc.Components.Schemas["TaskRequest"].Properties
	for _, f := range jsonFields(reflect.TypeOf(tasks.Request{})) {
		require.Contains(t, props, f, "schema TaskRequest lacks a field the API takes")
	}
}

// jsonFields lists the JSON names encoding/json gives t's fields, embedded
// structs flattened.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}
