package llm

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Cache keeps model replies on disk (bbolt), keyed by model, messages and
// parameters. Only calls with temperature 0 are cached: they are meant to be
// repeatable, so replaying them is what the caller asked for.
type Cache struct {
	mu sync.RWMutex // Close against calls still using the cache
	db *bolt.DB     // nil once closed: a closed cache misses and keeps nothing
}

var cacheBucket = []byte("replies")

// OpenCache opens (or creates) a cache file. Close it when done.
func OpenCache(path string) (*Cache, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return nil, fmt.Errorf("llm cache %s: the file is locked by another process (or another open cache in this one) for 2 s: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("llm cache %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(cacheBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("llm cache %s: %w", path, err)
	}
	return &Cache{db: db}, nil
}

// Close closes the file. Idempotent.
func (c *Cache) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db == nil {
		return nil
	}
	err := c.db.Close()
	c.db = nil
	return err
}

type cachedReply struct {
	Text         string `json:"text"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
}

func cacheKey(model string, body []byte) []byte {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write(body) // the request body: messages, temperature, max_tokens
	return h.Sum(nil)
}

func (c *Cache) get(key []byte) (cachedReply, bool) {
	var r cachedReply
	found := false
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.db == nil {
		return r, false
	}
	c.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(cacheBucket).Get(key); v != nil {
			found = json.Unmarshal(v, &r) == nil
		}
		return nil
	})
	return r, found
}

func (c *Cache) put(key []byte, r cachedReply) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.db == nil {
		return nil // closed: the reply is good, it is only not kept
	}
	return c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(cacheBucket).Put(key, v) })
}
