package com.alibaba.com.caucho.hessian.io.java8;

import java.io.Serializable;
import java.time.LocalTime;

/** The fields Dubbo's hessian-lite writes for a java.time.LocalTime (its class of this name). */
public class LocalTimeHandle implements Serializable {
    private static final long serialVersionUID = 1L;
    private int hour;
    private int minute;
    private int second;
    private int nano;

    public LocalTimeHandle(LocalTime t) {
        hour = t.getHour();
        minute = t.getMinute();
        second = t.getSecond();
        nano = t.getNano();
    }
}
