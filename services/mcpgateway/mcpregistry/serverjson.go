package mcpregistry

import (
	"encoding/json"
	"fmt"
)

// The registry's documents, as its API (/v0.1) and server.json schema spell them. Only what
// Zest reads is declared; the rest of a document is ignored.

// ServerJSON is a server.json: one version of a server.
type ServerJSON struct {
	Name        string      `json:"name"`
	Title       string      `json:"title,omitempty"`
	Description string      `json:"description"`
	Version     string      `json:"version"`
	WebsiteURL  string      `json:"websiteUrl,omitempty"`
	Repository  *Repository `json:"repository,omitempty"`
	Packages    []Package   `json:"packages,omitempty"`
	Remotes     []Transport `json:"remotes,omitempty"`
}

// Repository is where the server's source lives.
type Repository struct {
	URL       string `json:"url"`
	Source    string `json:"source"`
	Subfolder string `json:"subfolder,omitempty"`
}

// Package is one way to run the server locally: a package of a package registry.
type Package struct {
	RegistryType         string          `json:"registryType"`
	RegistryBaseURL      string          `json:"registryBaseUrl,omitempty"`
	Identifier           string          `json:"identifier"`
	Version              string          `json:"version,omitempty"`
	RuntimeHint          string          `json:"runtimeHint,omitempty"`
	Transport            Transport       `json:"transport"`
	RuntimeArguments     []Argument      `json:"runtimeArguments,omitempty"`
	PackageArguments     []Argument      `json:"packageArguments,omitempty"`
	EnvironmentVariables []KeyValueInput `json:"environmentVariables,omitempty"`
}

// Transport is how a client talks to the server: stdio for a package, or streamable-http or
// sse at url (a remote, or a package that serves HTTP).
type Transport struct {
	Type      string           `json:"type"`
	URL       string           `json:"url,omitempty"`
	Headers   []KeyValueInput  `json:"headers,omitempty"`
	Variables map[string]Input `json:"variables,omitempty"`
}

// Input is a value a person supplies, with what the schema says of it.
type Input struct {
	Description string   `json:"description,omitempty"`
	IsRequired  bool     `json:"isRequired,omitempty"`
	IsSecret    bool     `json:"isSecret,omitempty"`
	Format      string   `json:"format,omitempty"`
	Value       string   `json:"value,omitempty"`
	Default     string   `json:"default,omitempty"`
	Placeholder string   `json:"placeholder,omitempty"`
	Choices     []string `json:"choices,omitempty"`
}

// KeyValueInput is an environment variable or a header: a name and its Input; its value may
// hold {placeholders} of variables.
type KeyValueInput struct {
	Input
	Name      string           `json:"name"`
	Variables map[string]Input `json:"variables,omitempty"`
}

// Argument is a runtime or package argument: "positional" (its value) or "named" (its name,
// then its value when it has one).
type Argument struct {
	Input
	Type       string           `json:"type"`
	Name       string           `json:"name,omitempty"`
	ValueHint  string           `json:"valueHint,omitempty"`
	IsRepeated bool             `json:"isRepeated,omitempty"`
	Variables  map[string]Input `json:"variables,omitempty"`
}

// Entry is a server of the API's answers: its server.json and the registry's own metadata.
type Entry struct {
	Server ServerJSON `json:"server"`
	Meta   struct {
		Official *struct {
			Status   string `json:"status"`
			IsLatest bool   `json:"isLatest"`
		} `json:"io.modelcontextprotocol.registry/official,omitempty"`
	} `json:"_meta"`
}

// Status is the registry's status of the version ("active", "deprecated", "deleted"; "" when not given).
func (e Entry) Status() string {
	if e.Meta.Official == nil {
		return ""
	}
	return e.Meta.Official.Status
}

// Page is one page of GET /v0.1/servers.
type Page struct {
	Servers  []Entry `json:"servers"`
	Metadata struct {
		NextCursor string `json:"nextCursor,omitempty"`
		Count      int    `json:"count"`
	} `json:"metadata"`
}

// ParsePage reads GET /v0.1/servers' answer.
func ParsePage(body []byte) (Page, error) {
	var p Page
	if err := json.Unmarshal(body, &p); err != nil {
		return Page{}, fmt.Errorf("%w: a page of servers: %w", ErrBadAnswer, err)
	}
	for i, e := range p.Servers {
		if e.Server.Name == "" {
			return Page{}, fmt.Errorf("%w: server %d of the page has no name", ErrBadAnswer, i)
		}
	}
	return p, nil
}

// ParseEntry reads GET /v0.1/servers/{name}/versions/{version}'s answer.
func ParseEntry(body []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(body, &e); err != nil {
		return Entry{}, fmt.Errorf("%w: a server: %w", ErrBadAnswer, err)
	}
	if e.Server.Name == "" {
		return Entry{}, fmt.Errorf("%w: the server has no name", ErrBadAnswer)
	}
	return e, nil
}
