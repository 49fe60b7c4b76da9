// Package deploytest checks the deployment files at the module root against
// the code: docker-compose.yml must load as `docker compose config` loads it
// (the compose-spec loader and schema, and the docker CLI itself when it is
// installed), its one-shot service must create every search attribute the
// workflow sets, the worker must stay scalable, and every image the file
// builds must be a target of the Dockerfile. It has no code of its own.
package deploytest
