package llm

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Cache keeps model replies on disk (bbolt), keyed by model, messages and
// parameters. Only calls with temperature 0 are cached: they are meant to be
// repeatable, so replaying them is what the caller asked for.
type Cache struct {
	db *bolt.DB
}

var cacheBucket = []byte("replies")

// OpenCache opens (or creates) a cache file. Close it when done.
func OpenCache(path string) (*Cache, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
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
	if c == nil || c.db == nil {
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
	return c.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(cacheBucket).Put(key, v) })
}
