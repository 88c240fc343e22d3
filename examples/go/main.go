// Command sse-consumer follows a ddp-bridge session's live changes and keeps a local copy of
// the documents.
//
// Standard library only. Reconnects with Last-Event-ID; on `reset` it drops its copy (a
// snapshot follows). With a STATE file the copy and the last event id are kept there, and the
// next run resumes from them. Ctrl-C (or SIGTERM) prints the copy as one JSON line and exits.
//
//	cd examples/go && go run . http://127.0.0.1:8080 "$TOKEN" [STATE]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Copy is the documents by collection and id, and the id of the last event applied to them.
type Copy struct {
	LastEventID string                                           `json:"lastEventId"`
	Documents   map[string]map[string]map[string]json.RawMessage `json:"documents"`
	path        string
}

// Event is one server-sent event; Data is its JSON payload.
type Event struct {
	ID, Name string
	Data     json.RawMessage
}

type change struct {
	Collection string                     `json:"collection"`
	ID         string                     `json:"id"`
	Fields     map[string]json.RawMessage `json:"fields"`
	Cleared    []string                   `json:"cleared"`
}

func load(path string) (*Copy, error) {
	c := &Copy{Documents: map[string]map[string]map[string]json.RawMessage{}, path: path}
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	} else if err != nil {
		return nil, err
	}
	return c, json.Unmarshal(data, c)
}

func (c *Copy) apply(e Event) error {
	switch e.Name {
	case "reset":
		c.Documents = map[string]map[string]map[string]json.RawMessage{}
	case "added", "changed", "removed":
		var d change
		if err := json.Unmarshal(e.Data, &d); err != nil {
			return err
		}
		collection := c.Documents[d.Collection]
		if collection == nil {
			collection = map[string]map[string]json.RawMessage{}
			c.Documents[d.Collection] = collection
		}
		switch e.Name {
		case "added":
			collection[d.ID] = d.Fields
		case "changed":
			document := collection[d.ID]
			if document == nil {
				document = map[string]json.RawMessage{}
				collection[d.ID] = document
			}
			for field, value := range d.Fields {
				document[field] = value
			}
			for _, field := range d.Cleared {
				delete(document, field)
			}
		case "removed":
			delete(collection, d.ID)
		}
	}
	// Only whole states carry an id: the documents of a snapshot have none, its marker has.
	if e.ID != "" {
		c.LastEventID = e.ID
		return c.save()
	}
	return nil
}

func (c *Copy) save() error {
	if c.path == "" {
		return nil
	}
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.path+".tmp", data, 0o644); err != nil {
		return err
	}
	return os.Rename(c.path+".tmp", c.path)
}

// refused is an answer other than 200: reconnecting would not help.
type refused struct {
	status int
	body   string
}

func (r refused) Error() string { return fmt.Sprintf("refused: %d %s", r.status, r.body) }

// follow reads one connection to the stream, applying each event, until it ends or ctx is done.
func (c *Copy) follow(ctx context.Context, bridge, token string) error {
	request, err := http.NewRequestWithContext(ctx, http.MethodGet, bridge+"/v1/events?snapshot=true", nil)
	if err != nil {
		return err
	}
	request.Header.Set("Authorization", "Bearer "+token)
	request.Header.Set("Accept", "text/event-stream")
	if c.LastEventID != "" {
		request.Header.Set("Last-Event-ID", c.LastEventID)
	}
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		return err
	}
	defer response.Body.Close()
	if response.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(response.Body)
		return refused{response.StatusCode, string(body)}
	}
	return events(response.Body, func(e Event) error {
		if err := c.apply(e); err != nil {
			return err
		}
		id := e.ID
		if id == "" {
			id = "-"
		}
		fmt.Printf("%6s %-10s %s\n", id, e.Name, e.Data)
		return nil
	})
}

// events parses a text/event-stream, calling handle for each event that carries data.
func events(body io.Reader, handle func(Event) error) error {
	reader := bufio.NewReader(body)
	e, data := Event{Name: "message"}, []string{}
	for {
		line, err := reader.ReadString('\n')
		if err != nil {
			return err // io.EOF: the server ended the stream
		}
		line = strings.TrimRight(line, "\r\n")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			if len(data) > 0 {
				e.Data = json.RawMessage(strings.Join(data, "\n"))
				if err := handle(e); err != nil {
					return err
				}
			}
			e, data = Event{Name: "message"}, []string{}
		case field == "id":
			e.ID = value
		case field == "event":
			e.Name = value
		case field == "data":
			data = append(data, value)
		}
	}
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: sse-consumer BRIDGE TOKEN [STATE]")
		os.Exit(2)
	}
	bridge, token, path := os.Args[1], os.Args[2], ""
	if len(os.Args) > 3 {
		path = os.Args[3]
	}
	c, err := load(path)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code := 0
	for ctx.Err() == nil {
		err := c.follow(ctx, bridge, token)
		if ctx.Err() != nil {
			break
		}
		var r refused
		if errors.As(err, &r) {
			fmt.Println(r)
			code = 1
			break
		}
		fmt.Printf("connection lost (%v); resuming after event %s\n", err, c.LastEventID)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	out, err := json.Marshal(c)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
	os.Exit(code)
}
