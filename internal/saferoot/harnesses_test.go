package saferoot_test

// The harnesses declare their credential stores to this package
// (AddStoreRules, AddStores) when internal/harness is initialized; linking
// it here gives this package's tests the table a daemon has.
import _ "github.com/9harness/9harness/internal/harness"
