// Package fuzz holds the go test -fuzz targets for every decoder in
// package wire. Each target seeds its corpus with real encodings and
// checks, for any input: the decoder does not panic, and when it accepts
// the input, encoding the decoded value and decoding that again gives an
// equal value (and the same bytes when encoded once more).
//
// Run one with: go test ./fuzz -run '^$' -fuzz '^FuzzRaftBatch$' -fuzztime 30s
// or all with: make fuzz.
package fuzz
