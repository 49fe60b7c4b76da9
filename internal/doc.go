// Package internal holds, in its subpackages, the leaf helpers the product
// imports: yamlnode (positions in the policy file), markdown, logging,
// progress and tracing. They import nothing above policies/; the rigs
// tests run against are in testkit/.
package internal
