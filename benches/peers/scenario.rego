# The peers scenario in Rego (regorus): C1-C6, all expressed natively.
package scheduler

import rego.v1

default allow := false

allow if {
	# C1
	input.operation == "POST"
	regex.match(`^https://calendar\.example\.com/v3/calendars/(primary|team)/events$`, input.resource)

	# C2
	input.payload.organizer.email == input.agent.email

	# C3 (regex.match searches, so the pattern is anchored)
	every attendee in input.payload.attendees {
		regex.match(`^[^@]+@example\.com$`, attendee.email)
	}

	# C4
	is_array(input.payload.attendees)
	count(input.payload.attendees) <= 50

	# C5
	not has_recurrence

	# C6 (count of a string is its number of code points)
	is_string(input.payload.summary)
	count(input.payload.summary) >= 1
	count(input.payload.summary) <= 200
}

has_recurrence if {
	_ := input.payload.recurrence
}
