// Package lint holds the repository's own checks of its Go source, run as
// tests (go test ./internal/lint/): rules of the style that gofmt and go
// vet do not enforce. It has no code of its own.
package lint
