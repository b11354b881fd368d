package api

import (
	_ "embed"
	"net/http"
)

// versionsDoc is Zaqar's answer to GET / byte for byte.
const versionsDoc = `{"versions": [{"id": "2", "status": "CURRENT", "updated": "2014-9-24T04:06:47Z", "media-types": [{"base": "application/json", "type": "application/vnd.openstack.messaging-v2+json"}], "links": [{"href": "/v2/", "rel": "self"}]}]}`

// homeDoc is Zaqar's JSON-home document for the resources sluice serves,
// with sluice's deliveries extension (rel/queue_deliveries).
//
//go:embed home.json
var homeDoc []byte

var cacheDay = []string{"max-age=86400"}

// versions: GET / -> 300 with the versions document; no headers needed.
func (s *Server) versions(w http.ResponseWriter, r *http.Request, c *Call) {
	w.Header()["Content-Type"] = ctJSON
	w.WriteHeader(http.StatusMultipleChoices)
	if r.Method != http.MethodHead {
		w.Write([]byte(versionsDoc))
	}
}

// home: GET /v2/ -> the JSON-home document.
func (s *Server) home(w http.ResponseWriter, r *http.Request, c *Call) {
	h := w.Header()
	h["Content-Type"] = ctJSONHome
	h["Cache-Control"] = cacheDay
	w.WriteHeader(http.StatusOK)
	w.Write(homeDoc)
}

// routesV2 mounts the Zaqar v2 API. Admin extensions (pools, flavors) add
// theirs with Handle; see Extend.
func (s *Server) routesV2() {
	s.Handle("GET", "/{$}", Public, s.versions)
	s.Handle("HEAD", "/{$}", Public, s.versions)
	s.Handle("GET", "/healthz", Public, s.healthz)
	s.Handle("GET", "/readyz", Public, s.readyz)
	s.Handle("GET", "/v2/{$}", Project, s.home)
	s.Handle("GET", "/v2/ping", Project, s.ping)
	s.Handle("HEAD", "/v2/ping", Project, s.ping)
	s.Handle("GET", "/v2/health", Admin, s.health)

	s.Handle("GET", "/v2/queues", Project, s.listQueues)
	const q = "/v2/queues/{queue_name}"
	s.Handle("PUT", q, Project, s.putQueue)
	s.Handle("GET", q, Project, s.getQueue)
	s.Handle("PATCH", q, Project, s.patchQueue)
	s.Handle("DELETE", q, Project, s.deleteQueue)
	s.Handle("GET", q+"/stats", Project, s.queueStats)
	s.Handle("POST", q+"/purge", Project, s.purgeQueue)

	s.Handle("POST", q+"/messages", Project, s.postMessages)
	s.Handle("GET", q+"/messages", Project, s.listMessages)
	s.Handle("DELETE", q+"/messages", Project, s.deleteMessages)
	s.Handle("GET", q+"/messages/{message_id}", Project, s.getMessage)
	s.Handle("DELETE", q+"/messages/{message_id}", Project, s.deleteMessage)

	s.Handle("POST", q+"/claims", Project, s.createClaim)
	s.Handle("GET", q+"/claims/{claim_id}", Project, s.getClaim)
	s.Handle("PATCH", q+"/claims/{claim_id}", Project, s.updateClaim)
	s.Handle("DELETE", q+"/claims/{claim_id}", Project, s.deleteClaim)

	s.routesSubscriptions(q)
}
