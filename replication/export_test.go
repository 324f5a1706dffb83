package replication

// Exported for the tests of package replication_test.
var ReportLockOps = reportLockOps
