package chat

// SessionRequests is sessionRequests, for the tests of package chat_test.
var SessionRequests = sessionRequests
