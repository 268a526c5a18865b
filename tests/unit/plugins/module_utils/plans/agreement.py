# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Data and one assertion, no tests: the agreement between a role's plan and the readiness checks it owns.

Each plan's test file has an agreement table (AGREEMENT): rows of an odd or ordinary node state, the settings, and
what the row expects by hand - whether the role has work there (``work``: the plan has reasons, so site.yml runs the
role), whether it refuses the node (``refuses``: problems or errors, the role fails there changing nothing) and the
status of each check it owns.  ``assert_agrees`` checks the row against the plan, then the rule every row obeys:

* a check passes only where the plan has no drift for it, no settings problem and no facts missing;
* fixable drift (what a run of the role changes) fails its check, and is a reason to run: every reason of the plan is
  fixable drift of a check it owns, so no work of the role goes unseen by readiness;
* a refusal fails a check the role owns (a settings problem fails them all; an error fails the check its drift
  names);
* a check that fails where the role neither works nor refuses names why in unfixable drift (what no run of the role
  changes: a power cap set out of band, a full /dev/shm, ACS redirecting with the unit off).

So: no fixable drift <=> the check passes (or warns, or skips where the plan says it does not apply), and the plan
refuses => the check fails.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._readiness import plan_check


def verdicts(plan, checks):
    """check id -> (status, observed) of the checks ``checks`` as readiness reports them from ``plan``."""
    return dict((check, (plan_check(check, plan)['status'], plan_check(check, plan)['observed'])) for check in checks)


def assert_agrees(name, plan, checks, work, refuses, statuses):
    """``plan`` (finished: _plan.plan_with) against the row ``name`` and the agreement rule (module docstring)."""
    got = verdicts(plan, checks)
    has_work = bool(plan['reasons'])
    has_refusal = bool(plan['problems'] or plan['errors'])
    assert (has_work, has_refusal) == (work, refuses), '{0}: work {1}, refuses {2}; reasons {3}; refusal {4}'.format(
        name, has_work, has_refusal, plan['reasons'], plan['problems'] + plan['errors'])
    assert dict((check, status) for check, (status, _observed) in got.items()) == statuses, '{0}: {1}'.format(
        name, got)
    fixable = [item for item in plan['drift'] if item.get('fixable', True)]
    for check, (status, _observed) in got.items():
        drift = [item for item in plan['drift'] if item['check'] == check]
        if status == 'pass':
            # (An error of the plan is about one check, as its drift says: the role's other checks may pass.)
            assert not drift and not plan['problems'] and not plan['missing'], (name, check, drift)
        if [item for item in drift if item.get('fixable', True) and item.get('level', 'fail') == 'fail']:
            assert status == 'fail', (name, check, drift)
        if status == 'fail' and not has_refusal and not plan['missing']:
            assert [item for item in drift if item.get('level', 'fail') == 'fail'], (name, check, 'fails unnamed')
    # Every piece of the role's work is drift of a check it owns (readiness sees the work before the role runs).
    assert sorted(set(plan['reasons'])) == sorted(set(item['msg'] for item in fixable)), (
        name, plan['reasons'], fixable)
    if has_refusal:
        assert 'fail' in [status for status, _observed in got.values()], (name, got)
