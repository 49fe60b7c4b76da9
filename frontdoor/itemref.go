package frontdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/durable-llm/durable-llm/workflows"
)

// Item references (docs/responses.md "Item references"). An input item
// {"type": "item_reference", "id": …} names an output item of a stored
// response of the tenant: msg_<workflow ID>, the response's message, or
// fc_<workflow ID>_<i>, its i-th function call (newResponseObject makes
// these IDs). The Vercel AI SDK sends the assistant turns of a
// conversation it got from this API that way (store: true is its
// default). Before the body is decoded, each reference is replaced by
// the item it names, read from the call's result as chaining reads it
// (one Describe and one result per response named, however many of its
// items are), so the rest of the request is decoded as if the client had
// sent the items themselves. A reference that names no such item, an
// item of another tenant's response (the same 404: a tenant cannot learn
// that another's ID exists), of a deleted response or of one created
// with store: false is refused, naming input[i].id, and no call starts.

// parseItemID splits an output item ID into the call's workflow ID and
// the function call's index (-1: the message).
func parseItemID(id string) (wid string, fn int, ok bool) {
	if rest, found := strings.CutPrefix(id, "msg_"); found && rest != "" {
		return rest, -1, true
	}
	rest, found := strings.CutPrefix(id, "fc_")
	if !found {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '_')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != rest[i+1:] {
		return "", 0, false
	}
	return rest[:i], n, true
}

// storedResult is what a lookup of one response gave.
type storedResult struct {
	res workflows.CallResult
	err *apiError
}

// resolveItemReferences returns body with every item_reference input item
// replaced by the item it names. A body without one, or one the decoder
// will refuse anyway (not UTF-8, not an object, input not an array), is
// returned as it is.
func (h *Handler) resolveItemReferences(ctx context.Context, body []byte, tenant string) ([]byte, *apiError) {
	if !bytes.Contains(body, []byte("item_reference")) || checkText(body) != nil {
		return body, nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top == nil {
		return body, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(top["input"], &items) != nil {
		return body, nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.o.LookupTimeout)
	defer cancel()
	looked := map[string]storedResult{}
	changed := false
	for i, raw := range items {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			continue
		}
		var typ string
		if json.Unmarshal(obj["type"], &typ) != nil || typ != "item_reference" {
			continue
		}
		at := fmt.Sprintf("input[%d]", i)
		var id string
		if err := stringAt(obj, "id", at, &id); err != nil {
			return nil, invalidBody(err)
		}
		if id == "" {
			return nil, missingItemID(at)
		}
		item, apiErr := h.referencedItem(ctx, at, id, tenant, looked)
		if apiErr != nil {
			return nil, apiErr
		}
		if items[i], apiErr = marshalItem(item); apiErr != nil {
			return nil, apiErr
		}
		changed = true
	}
	if !changed {
		return body, nil
	}
	var apiErr *apiError
	if top["input"], apiErr = marshalItem(items); apiErr != nil {
		return nil, apiErr
	}
	return marshalItem(top)
}

// marshalItem is the JSON of v, an input item or the body with them.
func marshalItem(v any) (json.RawMessage, *apiError) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, rebuildFailed(err)
	}
	return b, nil
}

// referencedItem is the input item that output item id stands for: the
// assistant message, or the function call, of the tenant's stored
// response that produced it.
func (h *Handler) referencedItem(ctx context.Context, at, id, tenant string, looked map[string]storedResult) (any, *apiError) {
	wid, fn, ok := parseItemID(id)
	if !ok {
		return nil, itemNotFound(at, id, " (an item_reference names an output item of a stored response: msg_… or fc_…)")
	}
	rid := responseID(wid)
	sr, seen := looked[wid]
	if !seen {
		_, sr.res, _, sr.err = h.storedCall(ctx, rid, tenant)
		looked[wid] = sr
	}
	if e := sr.err; e != nil {
		switch {
		case e.status == http.StatusNotFound && strings.Contains(e.message, notStoredNote):
			return nil, itemNotFound(at, id, fmt.Sprintf(": response %q %s and is not kept (send the item itself)", rid, notStoredNote))
		case e.status == http.StatusNotFound:
			return nil, itemNotFound(at, id, "")
		case e.status == http.StatusBadRequest:
			return nil, itemNotUsable(at, id, e)
		}
		return nil, e
	}
	res := sr.res
	if fn < 0 {
		if res.Content == "" && len(res.ToolCalls) > 0 {
			return nil, itemNotFound(at, id, fmt.Sprintf(" (response %q answered with function calls only: fc_%s_0 …)", rid, wid))
		}
		return map[string]any{"type": "message", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": res.Content}}}, nil
	}
	if fn >= len(res.ToolCalls) {
		return nil, itemNotFound(at, id, fmt.Sprintf(" (response %q made %d function call(s))", rid, len(res.ToolCalls)))
	}
	c := res.ToolCalls[fn]
	return map[string]any{"type": "function_call", "call_id": c.ID, "name": c.Function.Name, "arguments": c.Function.Arguments}, nil
}
