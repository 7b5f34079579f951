package e2e

import (
	"fmt"
	"io"
	"net/http"
)

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }

func getOK(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b, nil
}
