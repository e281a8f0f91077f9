// Package acl is ringbroker's authorizer: Kafka's ACLs and the decisions of Kafka 4.1's
// StandardAuthorizer, as pure logic without I/O.
//
// An ACL is a Binding: a resource pattern (type, name, LITERAL or PREFIXED) and an entry
// (principal "Type:Name", host, operation, ALLOW or DENY). The enumerations carry Kafka's wire
// codes, so the broker converts kmsg's CreateAcls, DescribeAcls and DeleteAcls fields to them
// directly. ValidateCreation, ValidateDescribeFilter and ValidateDeleteFilter refuse what Kafka
// refuses, with Kafka's error code and message and the scope Kafka fails (one entry, the whole
// request, or the connection).
//
// The broker keeps an Authorizer in step with the ACL records of the metadata log: Add and
// Remove replay AccessControlEntryRecord and RemoveAccessControlEntryRecord by their 16-byte
// ids, Load replaces everything from a snapshot. Describe and Match answer DescribeAcls and
// find what DeleteAcls removes. Authorize and AuthorizeByResourceType decide actions; the
// rules are in their comments.
//
// Reads far outnumber writes and come from every handler goroutine, so Authorize is
// lock-free and does not allocate: it loads an immutable snapshot through an atomic pointer
// and looks the resource name up in maps per resource type (the literal name, "*", and one
// probe per distinct length of the PREFIXED names). A change copies the sorted ACL list and
// the maps of the one resource type it touches, then swaps the pointer; writers are
// serialized by a mutex.
//
// Left to the broker: the CLUSTER ALTER/DESCRIBE checks of the ACL APIs themselves,
// SECURITY_DISABLED without an authorizer, Kafka's AuthorizerNotReadyException before the
// initial load (the broker should not serve clients until the ACL records are replayed), and
// audit logging.
package acl
