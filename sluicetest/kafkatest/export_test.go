package kafkatest

// JavaMajor is javaMajor, for the tests.
var JavaMajor = javaMajor
