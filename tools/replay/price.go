package replay

import pricing "github.com/ctxguard/ctxguard/dashboard/price"

// Prices are package price's, under replay's names.
type (
	Price      = pricing.Price
	LongPrice  = pricing.LongPrice
	PriceTable = pricing.Table
)

// DefaultPrices returns the embedded price table (price.Default).
func DefaultPrices() PriceTable { return pricing.Default() }

// LoadPrices returns base overlaid with the price file at path
// (price.Load).
func LoadPrices(path string, base PriceTable) (PriceTable, error) { return pricing.Load(path, base) }

// ParsePrices is LoadPrices for the file's contents (price.Parse).
func ParsePrices(data []byte, base PriceTable) (PriceTable, error) { return pricing.Parse(data, base) }
