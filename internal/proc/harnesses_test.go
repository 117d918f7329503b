package proc_test

// The harnesses declare their variables to this package (AddWanted) when
// internal/harness is initialized; linking it here gives this package's
// tests the list a daemon has.
import _ "github.com/9harness/9harness/internal/harness"
