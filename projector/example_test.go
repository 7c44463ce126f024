package projector_test

import (
	"errors"
	"fmt"

	"github.com/revgate/projector/projector"
	"github.com/revgate/projector/projectortest"
)

// The events of a to-do list, as the write side records them.
type (
	ListCreated struct{ Title string }
	ItemAdded   struct{ Text string }
	ItemDone    struct{ Index int }
)

// The read model: one document per list.
type TodoList struct {
	Title string   `bson:"title"`
	Open  []string `bson:"open"`
	Done  int      `bson:"done"`
}

var errNoSuchItem = errors.New("no such item")

// A projection is a state type and pure functions. Fold computes the read model
// without any store; the engine computes the same through the revision gate.
func Example() {
	todo := projector.New[TodoList]("todo_lists", projector.StreamSuffix("todo-"))
	projector.Create(todo, func(e ListCreated) (TodoList, error) {
		return TodoList{Title: e.Title, Open: []string{}}, nil
	})
	projector.On(todo, func(l TodoList, e ItemAdded) (TodoList, error) {
		l.Open = append(l.Open, e.Text)
		return l, nil
	})
	projector.On(todo, func(l TodoList, e ItemDone) (TodoList, error) {
		if e.Index < 0 || e.Index >= len(l.Open) {
			return l, fmt.Errorf("item %d of %d: %w", e.Index, len(l.Open), errNoSuchItem)
		}
		l.Open = append(l.Open[:e.Index:e.Index], l.Open[e.Index+1:]...)
		l.Done++
		return l, nil
	})

	reg := projector.NewRegistry()
	projector.Register[ListCreated](reg, "ListCreated")
	projector.Register[ItemAdded](reg, "ItemAdded")
	projector.Register[ItemDone](reg, "ItemDone")

	log := projectortest.NewLog(reg)
	events, _ := log.Append("todo-42", ListCreated{"groceries"}, ItemAdded{"milk"}, ItemAdded{"bread"}, ItemDone{0})
	id, _ := todo.DocumentID(events[0])
	list, err := todo.Fold(events...)
	fmt.Printf("document %q: %+v, err %v\n", id, list, err)

	bad, _ := log.Append("todo-42", ItemDone{5})
	_, err = todo.Fold(append(events, bad...)...)
	fmt.Println(errors.Is(err, errNoSuchItem))
	// Output:
	// document "42": {Title:groceries Open:[bread] Done:1}, err <nil>
	// true
}
