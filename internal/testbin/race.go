//go:build race

package testbin

// raceEnabled reports whether this binary was built with -race; Build then
// builds its programs with -race too.
const raceEnabled = true
