package frontdoor

import (
	"net/http"
	"slices"
)

// listModels serves GET /v1/models.
func (h *Handler) listModels(w http.ResponseWriter, r *http.Request, _ string) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range h.models {
		list.Data = append(list.Data, model{ID: m, Object: "model", OwnedBy: "durable-llm"})
	}
	writeJSON(w, http.StatusOK, list)
}

// getModel serves GET /v1/models/{model}.
func (h *Handler) getModel(w http.ResponseWriter, r *http.Request, _ string) {
	id := r.PathValue("model")
	if !slices.Contains(h.models, id) {
		modelNotFound(id, h.models).write(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "model", "created": 0, "owned_by": "durable-llm"})
}
