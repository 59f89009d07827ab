// Command testworker is a worker process with Go agents, for end-to-end
// tests of what only a Go agent does (Request.Step's blocking write):
//
//	testworker --config FILE --redis URL
//
// runs worker.New on the config (its exec and HTTP agents too) with these
// Go agents registered, until SIGTERM or SIGINT:
//
//	steps   params {"n": N, "url": U}: an agent of N model-call steps
//	        s1…sN: each step the request does not hold (req.Step) POSTs
//	        {"step":"sI"} to U (an OpenAI-compatible chat endpoint) and
//	        records the reply's content as the step's data with its usage;
//	        succeeds with {"steps": [data…], "called": steps called this
//	        attempt}
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/agentq/agentq/agent"
	"github.com/agentq/agentq/config"
	"github.com/agentq/agentq/worker"
)

func main() {
	cfgPath := flag.String("config", "", "config file")
	redisURL := flag.String("redis", "redis://127.0.0.1:6379", "Redis URL")
	flag.Parse()
	if err := run(*cfgPath, *redisURL); err != nil {
		fmt.Fprintln(os.Stderr, "testworker:", err)
		os.Exit(1)
	}
}

func run(cfgPath, redisURL string) error {
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	w, err := worker.New(cfg, rdb, worker.WithAgent("steps", agent.Func(steps)))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return w.Run(ctx)
}

// steps is the "steps" agent.
func steps(ctx context.Context, req agent.Request) (json.RawMessage, error) {
	var p struct {
		N   int    `json:"n"`
		URL string `json:"url"`
	}
	if err := json.Unmarshal(req.Params, &p); err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, 0, p.N)
	called := 0
	for i := 1; i <= p.N; i++ {
		name := "s" + strconv.Itoa(i)
		data, err := req.Step(ctx, name, func(ctx context.Context) (any, error) {
			called++
			return modelCall(ctx, p.URL, name)
		})
		if err != nil {
			return nil, err
		}
		out = append(out, data)
	}
	return json.Marshal(map[string]any{"steps": out, "called": called})
}

// modelCall POSTs one step's call to the chat endpoint url: the reply's
// content as the step's data, with its usage.
func modelCall(ctx context.Context, url, step string) (agent.StepResult, error) {
	body, _ := json.Marshal(map[string]string{"step": step})
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return agent.StepResult{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hreq)
	if err != nil {
		return agent.StepResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return agent.StepResult{}, fmt.Errorf("model: HTTP %d", resp.StatusCode)
	}
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) == 0 {
		return agent.StepResult{}, fmt.Errorf("model: bad reply: %v", err)
	}
	return agent.StepResult{Data: r.Choices[0].Message.Content, Usage: r.Usage}, nil
}
