package main

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// benchLimits measures what one noisy client costs another: a quiet client (the admin key,
// not limited by rate) reads GET /api/v1/models alone, then beside a noisy one (the API key,
// ZEST_RATE_LIMIT=20/s) sending 10× its limit at a fixed pace, up to 64 at once.
func benchLimits(binDir, _ string, warm, dur time.Duration) error {
	const apiKey, adminKey, limit = "bench-noisy-key", "bench-quiet-key", 20
	s, err := startSuite(binDir, "LEMONADE_API_KEY="+apiKey, "LEMONADE_ADMIN_API_KEY="+adminKey,
		fmt.Sprintf("ZEST_RATE_LIMIT=%d/s", limit), "ZEST_RATE_LIMIT_KEYS=admin=off", "ZEST_CONCURRENCY_LIMIT=64")
	if err != nil {
		return err
	}
	defer s.stop()
	get := func(c *http.Client, key string) (int, error) {
		req, _ := http.NewRequest("GET", s.url+"/api/v1/models", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, err
	}
	quiet := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	noisy := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	quietCall := func() error {
		code, err := get(quiet, adminKey)
		if err == nil && code != 200 {
			err = fmt.Errorf("status %d", code)
		}
		return err
	}
	alone := run(1, warm, dur, quietCall)

	var ok, limited, other atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second / (10 * limit))
		defer tick.Stop()
		slots := make(chan struct{}, 64)
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			select {
			case slots <- struct{}{}:
			default:
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				switch code, _ := get(noisy, apiKey); code {
				case 200:
					ok.Add(1)
				case 429:
					limited.Add(1)
				default:
					other.Add(1)
				}
			}()
		}
	}()
	began := time.Now()
	beside := run(1, warm, dur, quietCall)
	close(stop)
	wg.Wait()
	noise := time.Since(began)

	fmt.Println("### Limits per key: a noisy client beside a quiet one")
	fmt.Println()
	fmt.Printf("GET /api/v1/models; the noisy client (API key, ZEST_RATE_LIMIT=%d/s) sends %d/s, up to 64 at once, for %.1f s: %d answered, %d refused 429, %d other.\n\n",
		limit, 10*limit, noise.Seconds(), ok.Load(), limited.Load(), other.Load())
	fmt.Println("| quiet client (admin key), one at a time | calls/s | p50 | p99 | errors |")
	fmt.Println("|---|---|---|---|---|")
	fmt.Printf("| alone | %.0f | %s | %s | %d |\n", alone.rate(), ms(alone.p50), ms(alone.p99), alone.errors)
	fmt.Printf("| beside the noisy client | %.0f | %s | %s | %d |\n", beside.rate(), ms(beside.p50), ms(beside.p99), beside.errors)
	fmt.Printf("\nmedian latency beside the noise: %+.1f %%\n\n", 100*(float64(beside.p50)/float64(alone.p50)-1))
	return nil
}
