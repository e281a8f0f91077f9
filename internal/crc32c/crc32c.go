// Package crc32c is the one CRC32C (Castagnoli) table of ringbroker: record batch v2 carries
// this checksum, and the Raft log, its transport and the partition snapshots frame their own
// records with it. hash/crc32 uses the CPU's CRC32 instructions for this polynomial where
// present.
package crc32c

import "hash/crc32"

// table is hash/crc32's Castagnoli table; it is never written after init.
var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, table) }
