package cart

import (
	"errors"
	"fmt"
	"slices"
)

var (
	// ErrInvalidQuantity: a product item whose quantity is not positive.
	ErrInvalidQuantity = errors.New("quantity must be positive")
	// ErrNotEnoughItems: removing more of a product than the cart holds,
	// including a product it does not hold at all.
	ErrNotEnoughItems = errors.New("not enough items in the cart")
)

// AddProductItem returns items with item added: the quantity of a product the
// list holds already grows, a new product goes at the end. items is not
// changed.
func AddProductItem(items []ProductItem, item ProductItem) ([]ProductItem, error) {
	if item.Quantity <= 0 {
		return nil, fmt.Errorf("add %d of product %q: %w", item.Quantity, item.ProductID, ErrInvalidQuantity)
	}
	out := slices.Clone(items)
	if out == nil {
		out = []ProductItem{}
	}
	if i := find(out, item.ProductID); i >= 0 {
		out[i].Quantity += item.Quantity
		return out, nil
	}
	return append(out, item), nil
}

// RemoveProductItem returns items with item removed: the product's quantity
// shrinks, and the product leaves the list at zero. Removing more than the
// list holds is an error wrapping [ErrNotEnoughItems]. items is not changed.
func RemoveProductItem(items []ProductItem, item ProductItem) ([]ProductItem, error) {
	if item.Quantity <= 0 {
		return nil, fmt.Errorf("remove %d of product %q: %w", item.Quantity, item.ProductID, ErrInvalidQuantity)
	}
	i := find(items, item.ProductID)
	held := 0
	if i >= 0 {
		held = items[i].Quantity
	}
	switch left := held - item.Quantity; {
	case left < 0:
		return nil, fmt.Errorf("remove %d of product %q, the cart holds %d: %w", item.Quantity, item.ProductID, held, ErrNotEnoughItems)
	case left == 0:
		return slices.Delete(slices.Clone(items), i, i+1), nil
	default:
		out := slices.Clone(items)
		out[i].Quantity = left
		return out, nil
	}
}

// TotalQuantity is the sum of the quantities of items.
func TotalQuantity(items []ProductItem) int {
	n := 0
	for _, it := range items {
		n += it.Quantity
	}
	return n
}

func find(items []ProductItem, productID string) int {
	return slices.IndexFunc(items, func(it ProductItem) bool { return it.ProductID == productID })
}
