package wire_test

import (
	"errors"
	"fmt"

	"github.com/shoalmq/shoal/wire"
)

// A request goes out as header + payload; the answer comes back under the
// same request id, either as the expected kind or as an Error.
func Example() {
	// Client: a Produce frame.
	buf, start := wire.BeginFrame(nil, wire.KindProduce, 7)
	buf = wire.AppendProduce(buf, &wire.Produce{Topic: []byte("topic-blue"), Epoch: 1, Records: [][]byte{[]byte("hello")}})
	buf, err := wire.EndFrame(buf, start)
	if err != nil {
		panic(err)
	}

	// Node: read the header, then the payload it announces.
	var h wire.Header
	if err := wire.DecodeHeader(buf, &h); err != nil {
		panic(err)
	}
	payload, _, err := wire.FramePayload(&h, buf[wire.HeaderSize:wire.HeaderSize+int(h.Length)], nil)
	if err != nil {
		panic(err)
	}
	var p wire.Produce
	if err := wire.DecodeProduce(payload, &p); err != nil {
		panic(err)
	}
	fmt.Printf("%v #%d: %s epoch %d, %d record(s)\n", h.Kind, h.RequestID, p.Topic, p.Epoch, len(p.Records))

	// Node: it does not own the topic at epoch 1 any more.
	reply, start := wire.BeginFrame(nil, wire.KindError, h.RequestID)
	reply = wire.AppendErrorResponse(reply, &wire.ErrorResponse{Code: wire.CodeNotLeaderForTopic, Epoch: 2, NodeID: "n3", Addr: "127.0.0.1:7103"})
	reply, _ = wire.EndFrame(reply, start)

	// Client: the answer is an error that says where to go.
	if err := wire.DecodeHeader(reply, &h); err != nil {
		panic(err)
	}
	var e wire.Error
	if err := wire.DecodeError(reply[wire.HeaderSize:], &e); err != nil {
		panic(err)
	}
	err = e.Err()
	var er *wire.ErrorResponse
	fmt.Println(errors.Is(err, wire.ErrNotLeaderForTopic), errors.As(err, &er) && er.Epoch == 2, err)
	// Output:
	// Produce #7: topic-blue epoch 1, 1 record(s)
	// true true shoal: not the topic owner at this epoch (epoch 2, owner n3 at 127.0.0.1:7103)
}
