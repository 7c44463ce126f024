package cart_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/revgate/projector/internal/cart"
)

func item(id string, q int) cart.ProductItem { return cart.ProductItem{ProductID: id, Quantity: q} }

func TestAddProductItem(t *testing.T) {
	cases := []struct {
		name  string
		items []cart.ProductItem
		add   cart.ProductItem
		want  []cart.ProductItem
	}{
		{"to an empty cart", nil, item("a", 2), []cart.ProductItem{item("a", 2)}},
		{"a new product goes last", []cart.ProductItem{item("a", 1)}, item("b", 3), []cart.ProductItem{item("a", 1), item("b", 3)}},
		{"an existing product merges", []cart.ProductItem{item("a", 1), item("b", 1)}, item("a", 4), []cart.ProductItem{item("a", 5), item("b", 1)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := slices.Clone(c.items)
			got, err := cart.AddProductItem(c.items, c.add)
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
			if !slices.Equal(c.items, before) {
				t.Fatalf("input changed: %v, was %v", c.items, before)
			}
		})
	}
}

func TestRemoveProductItem(t *testing.T) {
	cases := []struct {
		name    string
		items   []cart.ProductItem
		remove  cart.ProductItem
		want    []cart.ProductItem
		wantErr error
	}{
		{"decrements", []cart.ProductItem{item("a", 3)}, item("a", 1), []cart.ProductItem{item("a", 2)}, nil},
		{"drops the item at zero", []cart.ProductItem{item("a", 3), item("b", 1)}, item("a", 3), []cart.ProductItem{item("b", 1)}, nil},
		{"the last item leaves an empty list", []cart.ProductItem{item("a", 1)}, item("a", 1), []cart.ProductItem{}, nil},
		{"more than held", []cart.ProductItem{item("a", 1)}, item("a", 2), nil, cart.ErrNotEnoughItems},
		{"a product not in the cart", []cart.ProductItem{item("a", 1)}, item("z", 1), nil, cart.ErrNotEnoughItems},
		{"zero quantity", []cart.ProductItem{item("a", 1)}, item("a", 0), nil, cart.ErrInvalidQuantity},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := slices.Clone(c.items)
			got, err := cart.RemoveProductItem(c.items, c.remove)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if c.wantErr == nil && (!slices.Equal(got, c.want) || got == nil) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
			if !slices.Equal(c.items, before) {
				t.Fatalf("input changed: %v, was %v", c.items, before)
			}
		})
	}
}

// checkMerge runs a sequence of operations against the merge functions and
// against a plain map of quantities, and checks that the two agree and that
// the list stays well formed.
func checkMerge(t *testing.T, ops []byte) {
	t.Helper()
	var items []cart.ProductItem
	model := map[string]int{}
	var order []string // products in the order they were first added and still held
	for i := 0; i+1 < len(ops); i += 2 {
		id := string(rune('a' + ops[i]%5))
		q := int(ops[i+1]%7) - 1 // -1..5: invalid quantities too
		remove := ops[i]&0x80 != 0
		var next []cart.ProductItem
		var err error
		if remove {
			next, err = cart.RemoveProductItem(items, item(id, q))
		} else {
			next, err = cart.AddProductItem(items, item(id, q))
		}
		switch {
		case q <= 0:
			if !errors.Is(err, cart.ErrInvalidQuantity) {
				t.Fatalf("quantity %d: err = %v", q, err)
			}
			continue
		case remove && model[id] < q:
			if !errors.Is(err, cart.ErrNotEnoughItems) {
				t.Fatalf("remove %d of %s holding %d: err = %v", q, id, model[id], err)
			}
			continue
		case err != nil:
			t.Fatalf("op %d: unexpected %v", i/2, err)
		}
		if remove {
			model[id] -= q
			if model[id] == 0 {
				delete(model, id)
				order = slices.DeleteFunc(order, func(s string) bool { return s == id })
			}
		} else {
			if model[id] == 0 {
				order = append(order, id)
			}
			model[id] += q
		}
		items = next
		if len(items) != len(order) {
			t.Fatalf("items %v, want products %v", items, order)
		}
		for j, it := range items {
			if it.ProductID != order[j] || it.Quantity != model[it.ProductID] || it.Quantity <= 0 {
				t.Fatalf("items %v disagree with %v (order %v)", items, model, order)
			}
		}
	}
}

func TestMerge_agrees_with_a_map_of_quantities(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		ops := make([]byte, 2*(1+r.IntN(30)))
		for i := range ops {
			ops[i] = byte(r.UintN(256))
		}
		checkMerge(t, ops)
	}
}

func FuzzMerge(f *testing.F) {
	f.Add([]byte{0, 3, 0x80, 2, 1, 1, 0x81, 2})
	f.Add([]byte{0, 6, 0x80, 6, 0x80, 1})
	f.Fuzz(checkMerge)
}

func TestRandomLife_is_valid_for_the_merge_rules(t *testing.T) {
	p := cart.NewDetailsProjection()
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 300 {
		size := 1 + r.IntN(25)
		life := cart.RandomLife(r, "c", "client", size, fixedTime)
		if len(life) != size {
			t.Fatalf("life of %d events, want %d", len(life), size)
		}
		if _, err := p.Fold(envelopes(t, "c", life...)...); err != nil {
			t.Fatalf("life %d does not fold: %v", i, err)
		}
	}
}
